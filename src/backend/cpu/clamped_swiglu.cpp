// GPT-OSS's clamped SwiGLU (transformers' GptOssExperts._apply_gate), elementwise in fp32:
// g = min(gate, limit), u = clamp(up, −limit, limit), y = (u + 1)·g·σ(alpha·g), σ(x) = 1 / (1 + exp(−x)).
// Invariant: dgate and dup are overwritten; where a clamp holds its input the gradient through it is zero (inputs
// equal to a bound pass it, as torch.clamp's backward does).
#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"

namespace mt::cpu {

void clamped_swiglu_forward(float* y, const float* gate, const float* up, int64_t n, float alpha, float limit) {
#pragma omp parallel for if (n > parallel_min_elems) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], limit), u = std::clamp(up[i], -limit, limit);
    const float glu = g * (1.f / (1.f + std::exp(-(g * alpha))));
    y[i] = (u + 1.f) * glu;
  }
}

void clamped_swiglu_backward(float* dgate, float* dup, const float* dy, const float* gate, const float* up, int64_t n,
                             float alpha, float limit) {
#pragma omp parallel for if (n > parallel_min_elems) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], limit), u = std::clamp(up[i], -limit, limit);
    const float sg = 1.f / (1.f + std::exp(-(g * alpha)));
    const float glu = g * sg;
    dup[i] = up[i] >= -limit && up[i] <= limit ? dy[i] * glu : 0.f;
    const float dglu = dy[i] * (u + 1.f);
    dgate[i] = gate[i] <= limit ? dglu * (sg + g * alpha * sg * (1.f - sg)) : 0.f;
  }
}

}  // namespace mt::cpu
