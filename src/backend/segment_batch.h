// Packed segments as a right-padded virtual batch, for attention implementations without a segment mask (cuDNN's
// fused attention): every run of one segment id among a sequence's valid tokens is one virtual sequence, its tokens in
// order. The virtual sequences are grouped by length class (up to 64 tokens, then each power of two), so that a
// group's shorter members pad little, and each group's count is rounded up with one-token fillers to a power of two:
// an implementation that compiles a kernel per shape sees one length per class and few counts, however the batches
// vary.
// Invariants: every valid token of the call lies in exactly one virtual sequence and no padded token in any; a group
// holds its real segments first, in the order they appear, then its fillers (start -1, length 1); groups are
// ordered by class, shortest first; starts and lens hold every group's entries, group after group.
#pragma once
#include <cstdint>
#include <vector>

namespace mt {

struct SegmentGroup {
  int64_t first = 0;      // the group's first entry in starts / lens
  int64_t sequences = 0;  // its virtual sequences: segments, then fillers
  int64_t segments = 0;   // its real segments
  int64_t longest = 0;    // its longest segment (tokens)
  int64_t bound = 0;      // its class's bound: no segment of it is longer (64, or a power of two)
};

// What an AttnShape carries (backend.h): the groups on the host, starts and lens in backend memory.
struct SegmentBatch {
  std::vector<SegmentGroup> groups;
  const int32_t* starts = nullptr;  // [entries]: the call's token row (b·seq + i) of the sequence's first token; -1: filler
  const int32_t* lens = nullptr;    // [entries]: its tokens (a filler: 1)
};

// The layout on the host, before the engine places starts and lens in backend memory.
struct SegmentBatchLayout {
  std::vector<SegmentGroup> groups;
  std::vector<int32_t> starts, lens;
};

// The layout of a [batch, seq] call: segments [batch·seq] ids (nullptr: each sequence is one segment), seq_lens
// [batch] valid tokens (nullptr: all); host memory. A segment is a run of equal ids; the ids of one sequence's runs
// must rise (as the batch's piece ids and chunked attention's ids do), so that no id recurs after another.
SegmentBatchLayout segment_batch_layout(const int32_t* segments, const int32_t* seq_lens, int64_t batch, int64_t seq);
// The count a group of n segments is rounded up to: the power of two at or above n (0 for none).
int64_t segment_count_bucket(int64_t n);
// The most entries (starts, lens) a call of `tokens` tokens can need: a group's rounding at most doubles it.
int64_t segment_batch_entries_bound(int64_t tokens);

}  // namespace mt
