// Batcher: file order and wrapping, the frozen per-epoch shuffle, and seek(cursor) for resume.
#include <algorithm>

#include "catch.h"
#include "data/dataset.h"
#include "fixture.h"

namespace mt {
namespace {

// Example i holds tokens {i, i}, so a batch row's first id names the example.
std::vector<Example> numbered(int n) {
  std::vector<Example> out;
  for (int i = 0; i < n; ++i) out.push_back({{i, i}, {i, i}});
  return out;
}

std::vector<int32_t> picked(const Batch& b) {
  std::vector<int32_t> ids;
  for (int64_t s = 0; s < b.num_seqs; ++s) ids.push_back(b.input_ids[static_cast<size_t>(s * b.seq_len)]);
  return ids;
}

std::vector<int32_t> take(Batcher& batcher, int steps) {
  std::vector<int32_t> ids;
  for (int k = 0; k < steps; ++k) {
    const auto step = picked(batcher.next());
    ids.insert(ids.end(), step.begin(), step.end());
  }
  return ids;
}

}  // namespace

TEST_CASE("Batcher without shuffle: step k takes examples kB..kB+B-1, wrapping into the next epoch",
          "[data][batcher]") {
  Batcher batcher(numbered(5), 2, false, 42);
  CHECK(batcher.num_examples() == 5);
  for (int k = 0; k < 8; ++k) {
    const Batch b = batcher.next();
    CHECK(b.num_seqs == 2);
    CHECK(picked(b) == std::vector<int32_t>{(2 * k) % 5, (2 * k + 1) % 5});
  }
  CHECK(batcher.cursor().epoch == 3);
  CHECK(batcher.cursor().index == 1);
}

TEST_CASE("Batcher shuffle is a frozen permutation per epoch from (seed, epoch)", "[data][batcher]") {
  // Reference: std::mt19937_64(seed ^ epoch * 0x9E3779B97F4A7C15), Fisher-Yates from the last index down,
  // j uniform in [0, i] by rejection on raw 64-bit outputs (computed independently in Python).
  Batcher batcher(numbered(10), 5, true, 42);
  CHECK(take(batcher, 2) == std::vector<int32_t>{1, 7, 9, 0, 3, 8, 4, 2, 5, 6});
  CHECK(take(batcher, 2) == std::vector<int32_t>{2, 6, 1, 7, 3, 8, 4, 9, 5, 0});

  Batcher other(numbered(12), 4, true, 7);
  other.seek({3, 0});
  CHECK(take(other, 3) == std::vector<int32_t>{11, 9, 1, 2, 6, 10, 4, 8, 0, 3, 5, 7});
}

TEST_CASE("Batcher shuffle is deterministic for a seed and differs between seeds", "[data][batcher]") {
  Batcher a(numbered(50), 7, true, 123);
  Batcher b(numbered(50), 7, true, 123);
  Batcher c(numbered(50), 7, true, 124);
  const auto from_a = take(a, 30);
  CHECK(from_a == take(b, 30));
  CHECK(from_a != take(c, 30));
  // Every epoch is a permutation of all examples.
  for (size_t epoch = 0; epoch < 4; ++epoch) {
    std::vector<int32_t> seen(from_a.begin() + static_cast<long>(epoch * 50),
                              from_a.begin() + static_cast<long>(epoch * 50 + 50));
    std::sort(seen.begin(), seen.end());
    for (int32_t i = 0; i < 50; ++i) CHECK(seen[static_cast<size_t>(i)] == i);
  }
}

TEST_CASE("Batcher seek(cursor) reproduces the batches that follow", "[data][batcher]") {
  for (const bool shuffle : {false, true}) {
    Batcher a(numbered(7), 3, shuffle, 9);
    take(a, 4);  // ends mid-epoch, after one wrap
    const DataCursor cursor = a.cursor();
    CHECK(cursor.epoch == 1);
    CHECK(cursor.index == 5);
    const auto rest = take(a, 5);

    Batcher b(numbered(7), 3, shuffle, 9);
    b.seek(cursor);
    CHECK(b.cursor().epoch == cursor.epoch);
    CHECK(b.cursor().index == cursor.index);
    CHECK(take(b, 5) == rest);
  }
}

TEST_CASE("Batcher rejects a cursor beyond the dataset and empty input", "[data][batcher]") {
  Batcher batcher(numbered(4), 2, true, 1);
  CHECK(test::error_message([&] { batcher.seek({0, 5}); }).find("does not fit a dataset of 4 examples") !=
        std::string::npos);
  CHECK(test::error_message([] { Batcher({}, 2, false, 0); }) == "the dataset has no examples");
  CHECK(test::error_message([] { Batcher(numbered(3), 0, false, 0); }).find("batch_size must be positive") == 0);
}

}  // namespace mt
