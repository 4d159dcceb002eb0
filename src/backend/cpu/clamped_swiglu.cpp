// GPT-OSS's clamped SwiGLU (transformers' GptOssExperts._apply_gate), elementwise in fp32:
// g = min(gate, limit), u = clamp(up, −limit, limit), y = (u + 1)·g·σ(alpha·g), σ(x) = 1 / (1 + exp(−x)).
// y and dy are [rows, cols]; gate, up, dgate and dup rows lie ld apart (ld = 2·cols: one [gate | up] buffer).
// Invariant: dgate and dup are overwritten; each element's expressions are the same whatever ld; where a clamp holds
// its input the gradient through it is zero (inputs equal to a bound pass it, as torch.clamp's backward does).
#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"

namespace mt::cpu {

void clamped_swiglu_forward(real* y, const real* gate, const real* up, int64_t rows, int64_t cols, int64_t ld,
                            real alpha, real limit) {
  const StridedRows m("clamped_swiglu_forward", rows, cols, ld);
#pragma omp parallel for if (m.n > parallel_min_elems) schedule(static)
  for (int64_t i = 0; i < m.n; ++i) {
    const int64_t j = m.at(i);
    const real g = std::min(gate[j], limit), u = std::clamp(up[j], -limit, limit);
    const real glu = g * (1.f / (1.f + std::exp(-(g * alpha))));
    y[i] = (u + 1.f) * glu;
  }
}

void clamped_swiglu_backward(real* dgate, real* dup, const real* dy, const real* gate, const real* up, int64_t rows,
                             int64_t cols, int64_t ld, real alpha, real limit) {
  const StridedRows m("clamped_swiglu_backward", rows, cols, ld);
#pragma omp parallel for if (m.n > parallel_min_elems) schedule(static)
  for (int64_t i = 0; i < m.n; ++i) {
    const int64_t j = m.at(i);
    const real g = std::min(gate[j], limit), u = std::clamp(up[j], -limit, limit);
    const real sg = 1.f / (1.f + std::exp(-(g * alpha)));
    const real glu = g * sg;
    dup[j] = up[j] >= -limit && up[j] <= limit ? dy[i] * glu : 0.f;
    const real dglu = dy[i] * (u + 1.f);
    dgate[j] = gate[j] <= limit ? dglu * (sg + g * alpha * sg * (1.f - sg)) : 0.f;
  }
}

}  // namespace mt::cpu
