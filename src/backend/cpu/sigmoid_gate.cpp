// Sigmoid output gate of gated attention (Qwen3.5, Qwen3-Next): y = x·σ(gate), as transformers'
// `attn_output * torch.sigmoid(gate)` in fp32.
// Invariant: elementwise, each element's inputs read before its outputs are written (dx may alias dy).
#include <cmath>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"

namespace mt::cpu {

void sigmoid_gate_forward(real* y, const real* x, const real* gate, int64_t n) {
#pragma omp parallel for if (n > parallel_min_elems) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * sigmoid(gate[i]);
}

void sigmoid_gate_backward(real* dx, real* dgate, const real* dy, const real* x, const real* gate, int64_t n) {
#pragma omp parallel for if (n > parallel_min_elems) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const real s = sigmoid(gate[i]), d = dy[i];
    dgate[i] = d * x[i] * s * (1.f - s);
    dx[i] = d * s;
  }
}

}  // namespace mt::cpu
