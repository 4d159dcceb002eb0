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

// Preference stages' split of a global batch's n examples (pairs, KTO examples) over `parts` ranks: share `index` is
// examples [first, first + count), every share as even as n allows (the same shape whatever the tokens, so each
// example's terms are those of the one-rank run). Throws mt::Error when a share would hold fewer than min_examples.
struct ExampleShare {
  int64_t first = 0, count = 0;
};
ExampleShare example_share(int64_t n, int parts, int index, int64_t min_examples);

}  // namespace mt
