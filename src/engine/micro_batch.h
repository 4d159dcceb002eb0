// MicroBatch: a contiguous run of sequences of the step's batch, as views into the Batch arrays.
// Invariant: tokens = seqs * seq_len; every pointer addresses the first token/sequence of the run.
#pragma once
#include <cstdint>

#include "backend/segment_batch.h"

namespace mt {

struct MicroBatch {
  int64_t first_seq = 0;
  int64_t seqs = 0;
  int64_t seq_len = 0;
  const int32_t* input_ids = nullptr;  // [tokens]
  const int32_t* targets = nullptr;    // [tokens]
  const int32_t* positions = nullptr;  // [tokens]
  const int32_t* seq_lens = nullptr;   // [seqs]
  // Every sequence's valid tokens are seq_len (known on the host): attention runs without the lengths, whose padded
  // kernels cost a little more (cuDNN's tiled backward at 2 × 32768: 2.8 %).
  bool all_valid = false;
  const int32_t* segments = nullptr;   // [tokens] or null
  // [tokens] chunked attention's key groups (chunked_attention.h), or null where no position reaches a chunk boundary
  const int32_t* chunk_segments = nullptr;
  // segments and chunk_segments as virtual padded batches (backend/segment_batch.h), null where those are
  const SegmentBatch* segment_batch = nullptr;
  const SegmentBatch* chunk_segment_batch = nullptr;
  int64_t tokens() const { return seqs * seq_len; }
};

}  // namespace mt
