// Greedy knapsack packing (see packing.h), O(n log n) over an ordered set of (length, load position).
// Invariant: the output depends only on the examples' lengths and order.
#include "data/packing.h"

#include <limits>
#include <set>
#include <utility>

#include "core/error.h"

namespace mt {

std::vector<Example> pack_examples(std::vector<Example> examples, int64_t max_seq_len) {
  MT_ASSERT(max_seq_len > 0);
  // Key (length, -position): the last key not above (capacity, +inf) is the longest fitting example, earliest first.
  std::set<std::pair<int64_t, int64_t>> remaining;
  for (size_t i = 0; i < examples.size(); ++i) {
    const auto len = static_cast<int64_t>(examples[i].input_ids.size());
    MT_ASSERT(len > 0 && len <= max_seq_len && examples[i].pieces.empty());
    remaining.emplace(len, -static_cast<int64_t>(i));
  }
  std::vector<Example> packed;
  while (!remaining.empty()) {
    Example sequence;
    int64_t capacity = max_seq_len;
    while (true) {
      auto it = remaining.upper_bound({capacity, std::numeric_limits<int64_t>::max()});
      if (it == remaining.begin()) break;
      --it;
      Example& e = examples[static_cast<size_t>(-it->second)];
      capacity -= it->first;
      sequence.input_ids.insert(sequence.input_ids.end(), e.input_ids.begin(), e.input_ids.end());
      sequence.labels.insert(sequence.labels.end(), e.labels.begin(), e.labels.end());
      sequence.pieces.push_back(static_cast<int32_t>(it->first));
      e = Example{};
      remaining.erase(it);
    }
    packed.push_back(std::move(sequence));
  }
  return packed;
}

}  // namespace mt
