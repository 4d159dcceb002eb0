// split_eval: a seeded choice of held-out positions, both parts in load order.
#include "data/eval_split.h"

#include <cmath>

#include "config/yaml_fields.h"
#include "core/error.h"
#include "data/dataset.h"

namespace mt {

int64_t eval_count(double val_size, int64_t n) {
  if (val_size <= 0.0) return 0;
  if (val_size < 1.0) return static_cast<int64_t>(std::ceil(val_size * static_cast<double>(n)));
  return static_cast<int64_t>(val_size);
}

EvalSplit split_eval(std::vector<Example> examples, double val_size, uint64_t seed, const std::string& origin) {
  const auto n = static_cast<int64_t>(examples.size());
  const int64_t count = eval_count(val_size, n);
  EvalSplit split;
  if (count == 0) {
    split.train = std::move(examples);
    return split;
  }
  MT_REQUIRE(count < n, "{}: dataset.val_size: {} holds out {} of the {} examples of dataset.name, leaving none to "
             "train on", origin, real_to_text(val_size), count, n);
  std::vector<bool> held(static_cast<size_t>(n), false);
  const std::vector<int64_t> order = seeded_permutation(n, seed);
  for (int64_t k = 0; k < count; ++k) held[static_cast<size_t>(order[static_cast<size_t>(k)])] = true;
  for (int64_t i = 0; i < n; ++i)
    (held[static_cast<size_t>(i)] ? split.eval : split.train).push_back(std::move(examples[static_cast<size_t>(i)]));
  return split;
}

}  // namespace mt
