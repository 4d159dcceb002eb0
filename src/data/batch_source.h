// BatchSource: what hands out one global batch per optimizer step — the Batcher over examples in memory
// (data/dataset.h) or a BlockStream read as training goes (data/block_stream.h) — and its cursor, the position that
// checkpoints save and resume restores.
// Invariant: next_indices() moves the cursor and may only be called by one thread at a time; batch() of the indices
// it returned may run on other threads meanwhile; the batches are a pure function of the source and its cursor.
#pragma once
#include <cstdint>
#include <vector>

#include "data/batch.h"

namespace mt {

// Position in the example stream; part of the training state.
struct DataCursor {
  int64_t epoch = 0;
  int64_t index = 0;       // next example within the epoch's order
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // next() in two halves, for prefetching: the next batch's example indices (advances the cursor), and the batch
  // of given indices.
  virtual std::vector<int64_t> next_indices() = 0;
  virtual Batch batch(const std::vector<int64_t>& indices) = 0;
  virtual DataCursor cursor() const = 0;
  virtual void seek(const DataCursor& cursor) = 0;
  Batch next() { return batch(next_indices()); }
};

}  // namespace mt
