// Token-balanced shares of a global batch (see batch_share.h).
#include "data/batch_share.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "core/error.h"

namespace mt {

Batch batch_share(const Batch& global, int parts, int index, int64_t min_seqs) {
  const int64_t n = global.num_seqs;
  MT_REQUIRE(n >= parts * min_seqs,
             "training.batch_size: {} sequences do not split into {} data-parallel GPU ranks with {} sequence(s) "
             "each (the gradient accumulation passes); raise batch_size to at least {}",
             n, parts, min_seqs, parts * min_seqs);
  // Boundaries: the k-th is the prefix closest to k/parts of the tokens, leaving min_seqs to every share.
  std::vector<int64_t> prefix(static_cast<size_t>(n) + 1, 0);
  for (int64_t i = 0; i < n; ++i) prefix[static_cast<size_t>(i) + 1] = prefix[static_cast<size_t>(i)] + global.seq_lens[static_cast<size_t>(i)];
  std::vector<int64_t> bound(static_cast<size_t>(parts) + 1, 0);
  bound[static_cast<size_t>(parts)] = n;
  for (int k = 1; k < parts; ++k) {
    const double target = static_cast<double>(prefix.back()) * k / parts;
    const int64_t lo = bound[static_cast<size_t>(k) - 1] + min_seqs, hi = n - (parts - k) * min_seqs;
    int64_t best = lo;
    for (int64_t i = lo; i <= hi; ++i)
      if (std::abs(static_cast<double>(prefix[static_cast<size_t>(i)]) - target) <
          std::abs(static_cast<double>(prefix[static_cast<size_t>(best)]) - target))
        best = i;
    bound[static_cast<size_t>(k)] = best;
  }
  const int64_t first = bound[static_cast<size_t>(index)], count = bound[static_cast<size_t>(index) + 1] - first;
  return batch_rows(global, first, count);
}

ExampleShare example_share(int64_t n, int parts, int index, int64_t min_examples) {
  MT_REQUIRE(n >= parts * min_examples,
             "training.batch_size: {} examples do not split into {} data-parallel GPU ranks with {} example(s) each "
             "(the gradient accumulation passes); raise batch_size to at least {}",
             n, parts, min_examples, parts * min_examples);
  const int64_t first = n * index / parts, end = n * (index + 1) / parts;
  return {first, end - first};
}

}  // namespace mt
