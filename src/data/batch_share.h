// Data parallelism's split of a global batch: `parts` contiguous runs of sequences, balanced by token count,
// each at least `min_seqs` long (the gradient accumulation passes), each re-padded to its own longest sequence.
// Invariant: the shares of 0..parts-1 laid end to end are the global batch's sequences in order, so their summed
// losses and gradients are the global batch's (up to summation order).
#pragma once
#include <cstdint>

#include "data/batch.h"

namespace mt {

// Throws mt::Error when the batch has fewer than parts × min_seqs sequences.
Batch batch_share(const Batch& global, int parts, int index, int64_t min_seqs);

}  // namespace mt
