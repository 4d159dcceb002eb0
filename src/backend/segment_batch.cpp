// Packed segments as a virtual batch (see segment_batch.h).
#include "backend/segment_batch.h"

#include <algorithm>
#include <map>

#include "core/error.h"

namespace mt {
namespace {

// The length class of a segment: 6 up to 64 tokens, else ⌈log2 len⌉.
int length_class(int64_t len) {
  int c = 6;
  while ((int64_t{1} << c) < len) ++c;
  return c;
}

}  // namespace

int64_t segment_count_bucket(int64_t n) {
  if (n <= 0) return 0;
  int64_t count = 1;
  while (count < n) count *= 2;
  return count;
}

int64_t segment_batch_entries_bound(int64_t tokens) { return 2 * tokens; }

SegmentBatchLayout segment_batch_layout(const int32_t* segments, const int32_t* seq_lens, int64_t batch, int64_t seq) {
  struct Run {
    int32_t start, len;
  };
  std::map<int, std::vector<Run>> by_class;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t valid = seq_lens == nullptr ? seq : std::clamp<int64_t>(seq_lens[b], 0, seq);
    const int32_t* ids = segments == nullptr ? nullptr : segments + b * seq;
    for (int64_t i = 0; i < valid;) {
      int64_t j = i + 1;
      while (j < valid && (ids == nullptr || ids[j] == ids[i])) ++j;
      MT_ASSERT(ids == nullptr || j == valid || ids[j] > ids[i],
                "segment ids of sequence {} fall from {} to {} at token {}: a segment would recur", b, ids[i], ids[j],
                j);
      by_class[length_class(j - i)].push_back(Run{static_cast<int32_t>(b * seq + i), static_cast<int32_t>(j - i)});
      i = j;
    }
  }
  SegmentBatchLayout l;
  for (const auto& [cls, runs] : by_class) {
    SegmentGroup g;
    g.first = static_cast<int64_t>(l.starts.size());
    g.segments = static_cast<int64_t>(runs.size());
    g.sequences = segment_count_bucket(g.segments);
    g.bound = int64_t{1} << cls;
    for (const Run& r : runs) {
      l.starts.push_back(r.start);
      l.lens.push_back(r.len);
      g.longest = std::max<int64_t>(g.longest, r.len);
    }
    for (int64_t f = g.segments; f < g.sequences; ++f) {
      l.starts.push_back(-1);
      l.lens.push_back(1);
    }
    l.groups.push_back(g);
  }
  return l;
}

}  // namespace mt
