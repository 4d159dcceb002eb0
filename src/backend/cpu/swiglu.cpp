// SwiGLU gating y = silu(gate) · up, elementwise; silu(g) = g / (1 + exp(−g)) as PyTorch's CPU kernel computes it.
// Invariant: dgate and dup are overwritten.
#include <cmath>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"

namespace mt::cpu {

void swiglu_forward(float* y, const float* gate, const float* up, int64_t n) {
#pragma omp parallel for if (n > parallel_min_elems) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    y[i] = (g / (1.f + std::exp(-g))) * up[i];
  }
}

void swiglu_backward(float* dgate, float* dup, const float* dy, const float* gate, const float* up, int64_t n) {
#pragma omp parallel for if (n > parallel_min_elems) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float sig = 1.f / (1.f + std::exp(-g));
    dgate[i] = dy[i] * up[i] * (sig * (1.f + g * (1.f - sig)));
    dup[i] = dy[i] * (g / (1.f + std::exp(-g)));
  }
}

}  // namespace mt::cpu
