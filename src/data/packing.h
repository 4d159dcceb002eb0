// Packing (dataset.packing: true): examples laid end to end into sequences of at most max_seq_len tokens.
// Invariant: every example lands in exactly one sequence, unchanged, its length recorded in Example::pieces (so
// make_batch restarts positions, gives it its own segment and keeps its targets inside it).
#pragma once
#include <cstdint>
#include <vector>

#include "data/batch.h"

namespace mt {

// LLaMA-Factory's greedy knapsack, made deterministic: open a sequence, add the longest remaining example that still
// fits (the earliest in load order among equal lengths) until none fits, repeat. Sequences come out in opening order.
std::vector<Example> pack_examples(std::vector<Example> examples, int64_t max_seq_len);

}  // namespace mt
