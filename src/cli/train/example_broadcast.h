// The training examples of a node, tokenized once: the node's leading GPU rank loads them and sends them to the
// node's other GPU ranks (data parallelism), which would otherwise each read and tokenize the whole dataset.
// Invariant: every rank of `comm` ends with the same examples, in the same order, as rank 0 of `comm` had (their
// packing pieces, a preference pair's rejected sequence, a KTO example's KL sequence and tag; reference
// log-probabilities are attached later, on every rank).
#pragma once
#include <mpi.h>

#include <vector>

#include "data/batch.h"

namespace mt {

// Collective over comm: rank 0's `examples` are sent, the others' replaced.
void broadcast_examples(std::vector<Example>& examples, MPI_Comm comm);

}  // namespace mt
