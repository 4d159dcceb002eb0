// Global-norm gradient clipping as torch.nn.utils.clip_grad_norm_ computes it.
// Invariant: the coefficient multiplies every gradient of the step before any update; it never exceeds 1.
#pragma once

namespace mt {

// max_norm <= 0 disables clipping (coefficient 1).
inline float clip_coefficient(double total_norm, double max_norm) {
  if (max_norm <= 0.0) return 1.0f;
  const float coef = static_cast<float>(max_norm) / (static_cast<float>(total_norm) + 1e-6f);
  return coef < 1.0f ? coef : 1.0f;
}

}  // namespace mt
