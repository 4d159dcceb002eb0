// The fp64 update rule (see update_rule.h).
#include "integration/update_rule.h"

#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace mt::testing {

bool UpdateDistances::passes() const {
  return to_fp32 <= kUpdateTolerance * update_norm || ours_to_fp64 <= kFp64Factor * fp32_to_fp64;
}

std::string UpdateDistances::describe() const {
  char text[256];
  const double n = update_norm > 0 ? update_norm : 1.0;
  std::snprintf(text, sizeof text,
                "update ‖Δfp32‖ %.3e; relative to it: ours−fp32 %.3e (≤ %.0e passes), ours−fp64 %.3e, fp32−fp64 %.3e "
                "(ratio %.2f, ≤ %.0f passes)",
                update_norm, to_fp32 / n, kUpdateTolerance, ours_to_fp64 / n, fp32_to_fp64 / n,
                fp32_to_fp64 > 0 ? ours_to_fp64 / fp32_to_fp64 : INFINITY, kFp64Factor);
  return text;
}

UpdateDistances update_distances(const std::vector<double>& initial, const std::vector<double>& ours,
                                 const std::vector<double>& fp32, const std::vector<double>& fp64) {
  MT_ASSERT(ours.size() == initial.size() && fp32.size() == initial.size() && fp64.size() == initial.size());
  double norm = 0, to_fp32 = 0, ours_to_fp64 = 0, fp32_to_fp64 = 0;
  for (size_t i = 0; i < initial.size(); ++i) {
    const double d_ours = ours[i] - initial[i], d_fp32 = fp32[i] - initial[i], d_fp64 = fp64[i] - initial[i];
    norm += d_fp32 * d_fp32;
    to_fp32 += (d_ours - d_fp32) * (d_ours - d_fp32);
    ours_to_fp64 += (d_ours - d_fp64) * (d_ours - d_fp64);
    fp32_to_fp64 += (d_fp32 - d_fp64) * (d_fp32 - d_fp64);
  }
  return {std::sqrt(norm), std::sqrt(to_fp32), std::sqrt(ours_to_fp64), std::sqrt(fp32_to_fp64)};
}

}  // namespace mt::testing
