// The median of a set of timings, as the benches and the trainer report them: the upper middle element of the sorted
// values (no averaging of the two middle ones, so the figure is one that was measured). Invariant: 0 for no values.
#pragma once
#include <algorithm>
#include <vector>

namespace mt {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace mt
