// Packing: the greedy rule (longest fitting example first, earliest among equals), and make_batch on packed
// sequences: positions restart, one segment id per example (-1 on padding), no target crosses an example boundary.
#include "catch.h"
#include "data/packing.h"

namespace mt {
namespace {

// Example of `len` tokens, all equal to `tag`, every label trained.
Example example_of(int tag, int len) {
  Example e;
  e.input_ids.assign(static_cast<size_t>(len), tag);
  e.labels = e.input_ids;
  return e;
}

std::vector<int32_t> tags_of(const Example& sequence) {
  std::vector<int32_t> tags;
  size_t at = 0;
  for (const int32_t piece : sequence.pieces) {
    tags.push_back(sequence.input_ids[at]);
    at += static_cast<size_t>(piece);
  }
  return tags;
}

}  // namespace

TEST_CASE("pack_examples: greedy knapsack, deterministic, nothing lost", "[data][packing]") {
  // lengths by tag: 1:5 2:3 3:8 4:3 5:2 6:7 7:1, capacity 10
  std::vector<Example> examples;
  const std::vector<int> lengths = {5, 3, 8, 3, 2, 7, 1};
  for (size_t i = 0; i < lengths.size(); ++i) examples.push_back(example_of(static_cast<int>(i + 1), lengths[i]));
  const std::vector<Example> packed = pack_examples(examples, 10);
  // 8 (+2), then 7 (+3, the earlier 3), then 5 (+3, +1), nothing left.
  REQUIRE(packed.size() == 3);
  CHECK(tags_of(packed[0]) == std::vector<int32_t>{3, 5});
  CHECK(tags_of(packed[1]) == std::vector<int32_t>{6, 2});
  CHECK(tags_of(packed[2]) == std::vector<int32_t>{1, 4, 7});
  CHECK(packed[2].pieces == std::vector<int32_t>{5, 3, 1});
  CHECK(packed[2].labels == packed[2].input_ids);
  CHECK(pack_examples(examples, 10)[1].input_ids == packed[1].input_ids);
  const std::vector<Example> singles = pack_examples({example_of(9, 4)}, 4);
  REQUIRE(singles.size() == 1);
  CHECK(singles[0].pieces == std::vector<int32_t>{4});
}

TEST_CASE("make_batch on packed sequences restarts positions and keeps targets inside each example",
          "[data][packing]") {
  Example packed;
  packed.input_ids = {10, 11, 12, 20, 21};
  packed.labels = {-100, 11, 12, -100, 21};
  packed.pieces = {3, 2};
  Example plain;
  plain.input_ids = {30, 31};
  plain.labels = {30, 31};
  const Batch b = make_batch({packed, plain});
  CHECK(b.seq_len == 5);
  CHECK(b.input_ids == std::vector<int32_t>{10, 11, 12, 20, 21, 30, 31, 0, 0, 0});
  CHECK(b.positions == std::vector<int32_t>{0, 1, 2, 0, 1, 0, 1, 0, 0, 0});
  CHECK(b.segments == std::vector<int32_t>{0, 0, 0, 1, 1, 0, 0, -1, -1, -1});
  CHECK(b.targets == std::vector<int32_t>{11, 12, -100, 21, -100, 31, -100, -100, -100, -100});
  CHECK(b.num_target_tokens == 4);
  CHECK(b.num_tokens == 7);
  CHECK(make_batch({plain}).segments.empty());
}

}  // namespace mt
