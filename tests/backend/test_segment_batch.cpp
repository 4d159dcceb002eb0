// Packed segments as a virtual batch (backend/segment_batch.h): runs of one id among the valid tokens, grouped by
// length class shortest first, counts rounded up to a power of two with one-token fillers; every valid token in exactly one virtual
// sequence and no padded token in any, over random batches too.
#include <random>
#include <vector>

#include "backend/segment_batch.h"
#include "catch.h"
#include "core/error.h"

namespace {

// How many virtual sequences hold each token of a [batch, seq] call.
std::vector<int> coverage(const mt::SegmentBatchLayout& l, int64_t tokens) {
  std::vector<int> n(static_cast<size_t>(tokens), 0);
  for (size_t e = 0; e < l.starts.size(); ++e)
    if (l.starts[e] >= 0)
      for (int32_t i = 0; i < l.lens[e]; ++i) ++n[static_cast<size_t>(l.starts[e] + i)];
  return n;
}

}  // namespace

TEST_CASE("segment batch: runs of one id among the valid tokens, padding in none", "[backend][segments]") {
  // Three sequences of 10: three segments; one segment of 4 valid tokens; none (empty).
  const std::vector<int32_t> ids = {0, 0, 0, 1, 1, 2, 2, 2, 2, 2,  0, 0, 0, 0, -1, -1, -1, -1, -1, -1,
                                    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
  const std::vector<int32_t> lens = {10, 4, 0};
  const mt::SegmentBatchLayout l = mt::segment_batch_layout(ids.data(), lens.data(), 3, 10);
  REQUIRE(l.groups.size() == 1);  // all up to 64 tokens: one class
  CHECK(l.groups[0].first == 0);
  CHECK(l.groups[0].segments == 4);
  CHECK(l.groups[0].sequences == 4);
  CHECK(l.groups[0].longest == 5);
  CHECK(l.groups[0].bound == 64);
  CHECK(l.starts == std::vector<int32_t>{0, 3, 5, 10});
  CHECK(l.lens == std::vector<int32_t>{3, 2, 5, 4});
  // Without ids each sequence's valid tokens are one segment.
  const mt::SegmentBatchLayout whole = mt::segment_batch_layout(nullptr, lens.data(), 3, 10);
  CHECK(whole.starts == std::vector<int32_t>{0, 10});
  CHECK(whole.lens == std::vector<int32_t>{10, 4});
  const mt::SegmentBatchLayout all = mt::segment_batch_layout(nullptr, nullptr, 2, 10);
  CHECK(all.starts == std::vector<int32_t>{0, 10});
}

TEST_CASE("segment batch: groups by length class, shortest first, fillers to a count bucket",
          "[backend][segments]") {
  // One sequence of 300: segments of 200 (class 256) and 100 (class 128); then nine of 10 in a sequence of 90 + pad.
  std::vector<int32_t> ids(300, 0);
  for (int i = 200; i < 300; ++i) ids[static_cast<size_t>(i)] = 1;
  for (int s = 0; s < 9; ++s)
    for (int i = 0; i < 10; ++i) ids.push_back(s);
  ids.resize(600, -1);
  const std::vector<int32_t> lens = {300, 90};
  const mt::SegmentBatchLayout l = mt::segment_batch_layout(ids.data(), lens.data(), 2, 300);
  REQUIRE(l.groups.size() == 3);
  CHECK(l.groups[0].segments == 9);  // class 64: nine of 10, rounded up to 16 with seven fillers
  CHECK(l.groups[0].sequences == 16);
  CHECK(l.groups[0].longest == 10);
  for (int e = 9; e < 16; ++e) {
    CHECK(l.starts[static_cast<size_t>(e)] == -1);
    CHECK(l.lens[static_cast<size_t>(e)] == 1);
  }
  CHECK(l.starts[0] == 300);
  CHECK(l.groups[1].first == 16);  // class 128: the 100
  CHECK(l.groups[1].longest == 100);
  CHECK(l.groups[1].bound == 128);
  CHECK(l.starts[16] == 200);
  CHECK(l.groups[2].first == 17);  // class 256: the 200
  CHECK(l.groups[2].longest == 200);
  CHECK(l.groups[2].bound == 256);
  CHECK(l.starts[17] == 0);
  CHECK(l.starts.size() == 18);
  CHECK(l.lens.size() == 18);
}

TEST_CASE("segment batch: count buckets", "[backend][segments]") {
  CHECK(mt::segment_count_bucket(0) == 0);
  CHECK(mt::segment_count_bucket(1) == 1);
  CHECK(mt::segment_count_bucket(3) == 4);
  CHECK(mt::segment_count_bucket(16) == 16);
  CHECK(mt::segment_count_bucket(17) == 32);
  for (int64_t n = 1; n < 5000; ++n) {
    const int64_t b = mt::segment_count_bucket(n);
    CHECK((b >= n && b < 2 * n && (b & (b - 1)) == 0));
  }
}

TEST_CASE("segment batch: every valid token in exactly one virtual sequence, over random batches",
          "[backend][segments]") {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    const int64_t batch = 1 + rng() % 4, seq = 1 + rng() % 700;
    std::vector<int32_t> ids(static_cast<size_t>(batch * seq), -1), lens;
    for (int64_t b = 0; b < batch; ++b) {
      const auto len = static_cast<int32_t>(rng() % (seq + 1));
      lens.push_back(len);
      int32_t id = static_cast<int32_t>(rng() % 3);
      for (int32_t i = 0; i < len; ++i) {
        if (rng() % 40 == 0) id += 1 + static_cast<int32_t>(rng() % 2);
        ids[static_cast<size_t>(b * seq + i)] = id;
      }
    }
    const mt::SegmentBatchLayout l = mt::segment_batch_layout(ids.data(), lens.data(), batch, seq);
    const std::vector<int> n = coverage(l, batch * seq);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < seq; ++i) CHECK(n[static_cast<size_t>(b * seq + i)] == (i < lens[b] ? 1 : 0));
    CHECK(static_cast<int64_t>(l.starts.size()) <= mt::segment_batch_entries_bound(batch * seq));
    int64_t entries = 0;
    for (size_t g = 0; g < l.groups.size(); ++g) {
      const mt::SegmentGroup& grp = l.groups[g];
      CHECK(grp.first == entries);
      CHECK(grp.sequences == mt::segment_count_bucket(grp.segments));
      if (g > 0) CHECK(grp.longest > l.groups[g - 1].bound);  // classes rise
      CHECK(grp.longest <= grp.bound);
      for (int64_t e = grp.first; e < grp.first + grp.sequences; ++e) {
        CHECK(l.lens[static_cast<size_t>(e)] <= grp.longest);
        CHECK((l.starts[static_cast<size_t>(e)] < 0) == (e >= grp.first + grp.segments));
      }
      entries += grp.sequences;
    }
    CHECK(entries == static_cast<int64_t>(l.starts.size()));
  }
}

TEST_CASE("segment batch: an id that recurs after another is refused", "[backend][segments]") {
  const std::vector<int32_t> ids = {0, 0, 1, 1, 0};
  CHECK_THROWS_AS(mt::segment_batch_layout(ids.data(), nullptr, 1, 5), mt::Error);
}
