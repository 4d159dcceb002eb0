// Prefetcher: the same batches in the same order as the Batcher alone, for any number of workers, and an exact
// data cursor (batches built ahead do not move it).
#include "catch.h"
#include "data/dataset.h"
#include "data/prefetcher.h"
#include "fixture.h"

namespace mt {
namespace {

std::vector<Example> numbered(int n) {
  std::vector<Example> out;
  for (int i = 0; i < n; ++i) out.push_back({{i, i + 1, i + 2}, {i, i + 1, i + 2}, {}});
  return out;
}

}  // namespace

TEST_CASE("Prefetcher returns the Batcher's batches in order and keeps the cursor exact", "[data][prefetcher]") {
  for (const int64_t workers : {0, 1, 2, 4}) {
    Batcher reference(numbered(23), 5, true, 7);
    Batcher batcher(numbered(23), 5, true, 7);
    Prefetcher prefetcher(batcher, workers);
    CHECK(prefetcher.cursor().index == 0);
    for (int step = 0; step < 20; ++step) {
      const Batch expected = reference.next();
      const Batch got = prefetcher.next();
      CHECK(got.input_ids == expected.input_ids);
      CHECK(got.targets == expected.targets);
      CHECK(prefetcher.cursor().epoch == reference.cursor().epoch);
      CHECK(prefetcher.cursor().index == reference.cursor().index);
    }
  }
}

TEST_CASE("Prefetcher starts from a seeked cursor and rejects a negative worker count", "[data][prefetcher]") {
  Batcher reference(numbered(9), 4, true, 3);
  reference.seek({2, 5});
  Batcher batcher(numbered(9), 4, true, 3);
  batcher.seek({2, 5});
  Prefetcher prefetcher(batcher, 3);
  CHECK(prefetcher.cursor().epoch == 2);
  CHECK(prefetcher.cursor().index == 5);
  for (int step = 0; step < 6; ++step) CHECK(prefetcher.next().input_ids == reference.next().input_ids);
  CHECK(test::error_message([&] { Prefetcher(batcher, -1); }) == "dataset.num_workers must be >= 0, got -1");
}

}  // namespace mt
