// Depthwise causal conv1d + SiLU over tokens (Gated DeltaNet's short convolution), as transformers'
// causal_conv1d_fn fallback computes it in fp32 (F.conv1d with K − 1 zeros of left padding, no bias, then SiLU),
// with the taps cut at every sequence start and packed-segment boundary.
// Invariant: y[t, c] reads only x rows of t's own sequence and segment; dw accumulates in a fixed order.
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"

namespace mt::cpu {

namespace {

// The first tap index j (0..K-1) whose source row t − K + 1 + j lies in t's sequence and segment.
int64_t first_tap(int64_t t, int64_t seq_start, int64_t K, const int32_t* segments) {
  int64_t j = 0;
  while (j < K - 1) {
    const int64_t src = t - K + 1 + j;
    if (src >= seq_start && (!segments || segments[src] == segments[t])) break;
    ++j;
  }
  return j;
}

real pre_activation(const real* x, const real* w, int64_t t, int64_t c, int64_t C, int64_t K, int64_t j0) {
  real acc = 0.f;
  for (int64_t j = j0; j < K; ++j) acc += w[c * K + j] * x[(t - K + 1 + j) * C + c];
  return acc;
}

}  // namespace

void causal_conv1d_forward(real* y, const real* x, const real* w, int64_t batch, int64_t seq, int64_t C, int64_t K,
                           const int32_t* segments) {
  MT_ASSERT(K >= 1 && C > 0);
#pragma omp parallel for if (batch * seq * C * K > parallel_min_elems) schedule(static)
  for (int64_t t = 0; t < batch * seq; ++t) {
    const int64_t j0 = first_tap(t, t / seq * seq, K, segments);
    for (int64_t c = 0; c < C; ++c) {
      const real a = pre_activation(x, w, t, c, C, K, j0);
      y[t * C + c] = a / (1.f + std::exp(-a));
    }
  }
}

void causal_conv1d_backward(real* dx, real* dw, const real* dy, const real* x, const real* w, int64_t batch,
                            int64_t seq, int64_t C, int64_t K, const int32_t* segments) {
  MT_ASSERT(K >= 1 && C > 0);
  const int64_t T = batch * seq;
  std::vector<real> da(static_cast<size_t>(T * C));  // ∂/∂ the pre-activation
  std::vector<int64_t> j0(static_cast<size_t>(T));
#pragma omp parallel for if (T * C * K > parallel_min_elems) schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    j0[static_cast<size_t>(t)] = first_tap(t, t / seq * seq, K, segments);
    for (int64_t c = 0; c < C; ++c) {
      const real a = pre_activation(x, w, t, c, C, K, j0[static_cast<size_t>(t)]);
      const real s = 1.f / (1.f + std::exp(-a));
      da[static_cast<size_t>(t * C + c)] = dy[t * C + c] * s * (1.f + a * (1.f - s));
    }
  }
  zero(dx, T * C);
  // dx[src] += w[c, j]·da[t] for every tap of t; each row t writes rows t − K + 1 .. t: run over t in order.
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = j0[static_cast<size_t>(t)]; j < K; ++j) {
      const int64_t src = t - K + 1 + j;
      for (int64_t c = 0; c < C; ++c) dx[src * C + c] += w[c * K + j] * da[static_cast<size_t>(t * C + c)];
    }
#pragma omp parallel for if (T * C * K > parallel_min_elems) schedule(static)
  for (int64_t c = 0; c < C; ++c)
    for (int64_t j = 0; j < K; ++j) {
      double acc = 0.0;
      for (int64_t t = 0; t < T; ++t)
        if (j >= j0[static_cast<size_t>(t)])
          acc += static_cast<double>(da[static_cast<size_t>(t * C + c)]) * x[(t - K + 1 + j) * C + c];
      dw[c * K + j] += static_cast<real>(acc);
    }
}

}  // namespace mt::cpu
