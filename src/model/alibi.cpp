// ALiBi slopes (see alibi.h).
#include "model/alibi.h"

#include <cmath>

#include "core/error.h"

namespace mt {
namespace {

std::vector<double> interleave(int64_t n) {
  const double log2n = std::log2(static_cast<double>(n));
  if (log2n == std::floor(log2n)) {
    const double start = std::pow(2.0, -std::pow(2.0, -(log2n - 3.0)));
    std::vector<double> out;
    for (int64_t i = 0; i < n; ++i) out.push_back(start * std::pow(start, static_cast<double>(i)));
    return out;
  }
  const auto closest = static_cast<int64_t>(std::pow(2.0, std::floor(log2n)));
  std::vector<double> out = interleave(closest);
  const std::vector<double> wider = interleave(2 * closest);
  for (int64_t i = 0; i < n - closest; ++i) out.push_back(wider[static_cast<size_t>(2 * i)]);
  return out;
}

}  // namespace

std::vector<float> alibi_slopes(int64_t num_heads) {
  MT_ASSERT(num_heads > 0);
  std::vector<float> out;
  for (const double s : interleave(num_heads)) out.push_back(static_cast<float>(s));
  return out;
}

}  // namespace mt
