// make_batch: the label shift, padding, positions and counts on a hand-worked example.
#include "catch.h"
#include "data/batch.h"

namespace mt {

TEST_CASE("make_batch shifts labels into targets and right-pads", "[data][batch]") {
  const std::vector<Example> examples = {
      {{5, 6, 7, 8}, {kIgnoreIndex, kIgnoreIndex, 7, 8}},
      {{9, 10}, {9, 10}},
  };
  const Batch b = make_batch(examples);
  const int32_t x = kIgnoreIndex;
  CHECK(b.num_seqs == 2);
  CHECK(b.seq_len == 4);
  CHECK(b.input_ids == std::vector<int32_t>{5, 6, 7, 8, 9, 10, 0, 0});
  CHECK(b.targets == std::vector<int32_t>{x, 7, 8, x, 10, x, x, x});
  CHECK(b.positions == std::vector<int32_t>{0, 1, 2, 3, 0, 1, 0, 0});
  CHECK(b.seq_lens == std::vector<int32_t>{4, 2});
  CHECK(b.segments.empty());
  CHECK(b.num_target_tokens == 3);
  CHECK(b.num_tokens == 6);
}

TEST_CASE("make_batch of one full-length sequence has no padding", "[data][batch]") {
  const Batch b = make_batch({{{3, 4, 5}, {3, 4, 5}}});
  CHECK(b.seq_len == 3);
  CHECK(b.targets == std::vector<int32_t>{4, 5, kIgnoreIndex});
  CHECK(b.num_target_tokens == 2);
  CHECK(b.num_tokens == 3);
}

}  // namespace mt
