// The held-out evaluation set taken out of the training examples (dataset.val_size), as LLaMA-Factory's
// train_test_split takes it: a fraction rounds up (ceil(val_size · n)), a count >= 1 is a number of examples.
// Invariant: the split is a pure function of (examples, val_size, seed); both parts keep load order, and together
// they hold every example exactly once.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/batch.h"

namespace mt {

struct EvalSplit {
  std::vector<Example> train;
  std::vector<Example> eval;
};

// The number of examples val_size holds out of n (0 when val_size is 0).
int64_t eval_count(double val_size, int64_t n);

// Holds eval_count(val_size, n) examples out, at the first positions of seeded_permutation(n, seed). Leaving no
// training example, or holding out none though val_size > 0, raises mt::Error "<origin>: dataset.val_size: ...".
EvalSplit split_eval(std::vector<Example> examples, double val_size, uint64_t seed, const std::string& origin);

}  // namespace mt
