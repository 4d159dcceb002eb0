// AdamW, fused and vectorised: torch's single-tensor order of fp32 operations, scalars computed in fp64
// and rounded to fp32 as torch does when it hands Python floats to fp32 kernels.
#include "optim/adamw.h"

#include <cmath>

#include "core/dtype.h"

namespace mt {

void adamw_update(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n,
                  const AdamWStep& hp, bool decay, std::uint16_t* bf16_out) {
  const double bias_correction1 = 1.0 - std::pow(hp.beta1, static_cast<double>(hp.step));
  const double bias_correction2 = 1.0 - std::pow(hp.beta2, static_cast<double>(hp.step));
  const float decay_factor = static_cast<float>(1.0 - hp.lr * (decay ? hp.weight_decay : 0.0));
  const float m_weight = static_cast<float>(1.0 - hp.beta1);
  const float v_decay = static_cast<float>(hp.beta2);
  const float v_weight = static_cast<float>(1.0 - hp.beta2);
  const float neg_step_size = static_cast<float>(-(hp.lr / bias_correction1));
  const float bc2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  const float eps = static_cast<float>(hp.eps);
  const float scale = hp.grad_scale;
  const bool scaled = scale != 1.0f;

#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float g = scaled ? grad[i] * scale : grad[i];
    float p = param[i] * decay_factor;
    const float m = exp_avg[i] + m_weight * (g - exp_avg[i]);
    const float v = exp_avg_sq[i] * v_decay + v_weight * g * g;
    const float denom = std::sqrt(v) / bc2_sqrt + eps;
    p = p + neg_step_size * m / denom;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    param[i] = p;
    if (bf16_out) bf16_out[i] = f32_to_bf16(p);
  }
}

}  // namespace mt
