// The parity rule on one trained tensor, judged on its UPDATE (final − initial): ours passes where it is within 1e-3
// (relative L2) of PyTorch fp32's update, or no further from PyTorch float64's update than 3× PyTorch fp32's own
// distance from it. Ill-conditioned tensors (a near-zero gradient that AdamW amplifies to ±lr) then pass exactly
// as far as PyTorch fp32 itself is from the true answer, and a wrong gradient fails wherever PyTorch fp32 is close.
// Invariant: pure functions of the four tensors; no tolerance depends on the tensor's name.
#pragma once
#include <string>
#include <vector>

namespace mt::testing {

inline constexpr double kUpdateTolerance = 1e-3;  // relative to PyTorch fp32's update
inline constexpr double kFp64Factor = 3.0;        // × PyTorch fp32's own distance from float64

struct UpdateDistances {
  double update_norm = 0;   // ‖Δfp32‖
  double to_fp32 = 0;       // ‖Δours − Δfp32‖
  double ours_to_fp64 = 0;  // ‖Δours − Δfp64‖
  double fp32_to_fp64 = 0;  // ‖Δfp32 − Δfp64‖
  bool passes() const;      // the rule above
  std::string describe() const;  // the four numbers, relative to ‖Δfp32‖, for a failure message
};

// Δx = x − initial, in double; all four of initial's size.
UpdateDistances update_distances(const std::vector<double>& initial, const std::vector<double>& ours,
                                 const std::vector<double>& fp32, const std::vector<double>& fp64);

}  // namespace mt::testing
