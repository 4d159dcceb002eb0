// batch_share: data parallelism's token-balanced, contiguous shares of a global batch, re-padded per share.
#include "catch.h"
#include "core/error.h"
#include "data/batch.h"
#include "data/batch_share.h"

namespace mt {
namespace {

Example sequence(int32_t first, int32_t length) {
  Example e;
  for (int32_t t = 0; t < length; ++t) e.input_ids.push_back(first + t);
  e.labels = e.input_ids;
  return e;
}

}  // namespace

TEST_CASE("shares are contiguous, balanced by tokens and laid end to end are the batch", "[data][batch]") {
  // Lengths 8, 1, 1, 1, 1, 4: 16 tokens; two shares of 8 are the first sequence and the rest.
  const Batch global = make_batch({sequence(10, 8), sequence(20, 1), sequence(30, 1), sequence(40, 1),
                                   sequence(50, 1), sequence(60, 4)});
  const Batch a = batch_share(global, 2, 0, 1), b = batch_share(global, 2, 1, 1);
  CHECK(a.num_seqs == 1);
  CHECK(b.num_seqs == 5);
  CHECK(a.seq_len == 8);
  CHECK(b.seq_len == 4);  // re-padded to its own longest sequence
  CHECK(a.num_tokens + b.num_tokens == global.num_tokens);
  CHECK(a.num_target_tokens + b.num_target_tokens == global.num_target_tokens);
  CHECK(b.input_ids == std::vector<int32_t>{20, 0, 0, 0, 30, 0, 0, 0, 40, 0, 0, 0, 50, 0, 0, 0, 60, 61, 62, 63});
  CHECK(b.positions[16] == 0);
  CHECK(b.seq_lens == std::vector<int32_t>{1, 1, 1, 1, 4});
  CHECK(b.targets[16] == 61);

  // Every share keeps at least min_seqs sequences (the accumulation passes), even against the balance.
  const Batch c = batch_share(global, 2, 0, 2);
  CHECK(c.num_seqs == 2);
  CHECK(batch_share(global, 3, 2, 2).num_seqs == 2);
}

TEST_CASE("packed segments travel with their sequences", "[data][batch]") {
  Example packed = sequence(1, 6);
  packed.pieces = {3, 3};
  const Batch global = make_batch({sequence(10, 2), packed});
  const Batch s = batch_share(global, 2, 1, 1);
  REQUIRE(s.num_seqs == 1);
  CHECK(s.segments == std::vector<int32_t>{0, 0, 0, 1, 1, 1});
  CHECK(s.positions == std::vector<int32_t>{0, 1, 2, 0, 1, 2});
}

TEST_CASE("a batch too small for the ranks and passes is refused, naming batch_size", "[data][batch]") {
  const Batch global = make_batch({sequence(1, 3), sequence(5, 3), sequence(9, 3)});
  CHECK_THROWS_WITH(batch_share(global, 2, 0, 2),
                    mt_test::contains("training.batch_size: 3 sequences do not split into 2 data-parallel GPU ranks"));
}

TEST_CASE("preference examples split evenly over the ranks, whole examples each", "[data][batch]") {
  // 7 examples over 3 ranks: 2, 2, 3 (the one-rank run's examples laid end to end).
  int64_t next = 0;
  for (int r = 0; r < 3; ++r) {
    const ExampleShare share = example_share(7, 3, r, 2);
    CHECK(share.first == next);
    CHECK(share.count == (r == 2 ? 3 : 2));
    next += share.count;
  }
  CHECK(next == 7);
  CHECK(example_share(1, 2, 0, 0).count == 0);  // a short last batch: a rank may hold none (reference pass)
  CHECK_THROWS_WITH(example_share(5, 3, 0, 2),
                    mt_test::contains("training.batch_size: 5 examples do not split into 3 data-parallel GPU ranks "
                                      "with 2 example(s) each"));
  // batch_rows keeps each row's reference log-probability; a KTO batch's KL half is rows N..2N-1.
  Example kto = sequence(1, 3);
  kto.kl_ids = {1, 2, 9, 9};
  kto.kl_labels = {-100, 2, 9, 9};
  kto.desirable = true;
  kto.reference_logps = {-1.5, -4.0};
  const Batch batch = make_batch({kto});
  REQUIRE(batch.num_seqs == 2);
  const Batch kl = batch_rows(batch, 1, 1);
  CHECK(kl.seq_len == 4);
  CHECK(kl.input_ids == kto.kl_ids);
  CHECK(kl.reference_logps == std::vector<double>{-4.0});
  CHECK(target_counts(batch) == std::vector<int64_t>{2, 3});
}

}  // namespace mt
