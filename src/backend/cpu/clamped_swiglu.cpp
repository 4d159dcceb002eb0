// GPT-OSS's clamped SwiGLU (transformers' GptOssExperts._apply_gate), elementwise in fp32:
// g = min(gate, limit), u = clamp(up, −limit, limit), y = (u + 1)·g·σ(alpha·g), σ(x) = 1 / (1 + exp(−x)).
// Invariant: dgate and dup are overwritten; where a clamp holds its input the gradient through it is zero (inputs
// equal to a bound pass it, as torch.clamp's backward does).
#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"

namespace mt::cpu {

void clamped_swiglu_forward(real* y, const real* gate, const real* up, int64_t n, real alpha, real limit) {
#pragma omp parallel for if (n > parallel_min_elems) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const real g = std::min(gate[i], limit), u = std::clamp(up[i], -limit, limit);
    const real glu = g * (1.f / (1.f + std::exp(-(g * alpha))));
    y[i] = (u + 1.f) * glu;
  }
}

void clamped_swiglu_backward(real* dgate, real* dup, const real* dy, const real* gate, const real* up, int64_t n,
                             real alpha, real limit) {
#pragma omp parallel for if (n > parallel_min_elems) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const real g = std::min(gate[i], limit), u = std::clamp(up[i], -limit, limit);
    const real sg = 1.f / (1.f + std::exp(-(g * alpha)));
    const real glu = g * sg;
    dup[i] = up[i] >= -limit && up[i] <= limit ? dy[i] * glu : 0.f;
    const real dglu = dy[i] * (u + 1.f);
    dgate[i] = gate[i] <= limit ? dglu * (sg + g * alpha * sg * (1.f - sg)) : 0.f;
  }
}

}  // namespace mt::cpu
