// Gated DeltaNet's per-head gates from the b | a projections, as transformers' Qwen3_5GatedDeltaNet computes them:
// beta = sigmoid(b), g = −exp(A_log)·softplus(a + dt_bias) (torch softplus: beta 1, linear above 20), in fp32.
// Invariant: g, beta, d_ba are written per element; d_a_log and d_dt_bias accumulate over tokens in token order.
#include <cmath>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"

namespace mt::cpu {

namespace {
real softplus(real x) { return x > 20.f ? x : std::log1p(std::exp(x)); }
}  // namespace

void deltanet_gates_forward(real* g, real* beta, const real* ba, const real* a_log, const real* dt_bias,
                            int64_t T, int64_t n) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < n; ++h) {
      beta[t * n + h] = sigmoid(ba[t * 2 * n + h]);
      g[t * n + h] = -std::exp(a_log[h]) * softplus(ba[t * 2 * n + n + h] + dt_bias[h]);
    }
}

void deltanet_gates_backward(real* d_ba, real* d_a_log, real* d_dt_bias, const real* dg, const real* dbeta,
                             const real* ba, const real* a_log, const real* dt_bias, int64_t T, int64_t n) {
  for (int64_t h = 0; h < n; ++h) {
    const real A = std::exp(a_log[h]);
    double acc_a_log = 0.0, acc_dt = 0.0;
    for (int64_t t = 0; t < T; ++t) {
      const real b = sigmoid(ba[t * 2 * n + h]);
      d_ba[t * 2 * n + h] = dbeta[t * n + h] * b * (1.f - b);
      const real x = ba[t * 2 * n + n + h] + dt_bias[h];
      const real d = dg[t * n + h];
      const real dx = -A * (x > 20.f ? 1.f : sigmoid(x)) * d;  // ∂g/∂x = −A·σ(x)
      d_ba[t * 2 * n + n + h] = dx;
      acc_dt += dx;
      acc_a_log += static_cast<double>(d) * (-A * softplus(x));  // ∂g/∂A_log = g
    }
    d_a_log[h] += static_cast<real>(acc_a_log);
    d_dt_bias[h] += static_cast<real>(acc_dt);
  }
}

}  // namespace mt::cpu
