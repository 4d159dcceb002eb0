// RMSNorm gated by silu(z), as transformers' Qwen3_5RMSNormGated / Qwen3NextRMSNormGated compute it in fp32:
// y = w·(x·rsqrt(mean(x²) + eps))·silu(z) over rows of D (the norm before the gate, a plain weight w).
// Invariant: mean(x²) is accumulated in fp64; dw accumulates over rows in row order (one writer per column).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"

namespace mt::cpu {

namespace {

real silu(real z) { return z / (1.f + std::exp(-z)); }

}  // namespace

void gated_rmsnorm_forward(real* y, const real* x, const real* z, const real* w, int64_t N, int64_t D, real eps) {
  MT_ASSERT(N >= 0 && D > 0);
#pragma omp parallel for if (N * D > parallel_min_elems) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const real* xr = x + n * D;
    const real* zr = z + n * D;
    const real r = row_rstd(xr, D, eps);
    for (int64_t d = 0; d < D; ++d) y[n * D + d] = w[d] * (xr[d] * r) * silu(zr[d]);
  }
}

void gated_rmsnorm_backward(real* dx, real* dz, real* dw, const real* dy, const real* x, const real* z,
                            const real* w, int64_t N, int64_t D, real eps) {
  MT_ASSERT(N >= 0 && D > 0);
  std::vector<real> rstd(static_cast<size_t>(N));
  // With n = w·x̂ (the normed row) and y = n·silu(z): dz = dy·n·silu'(z); dn = dy·silu(z);
  // dx = rstd·(w·dn) − x·rstd³/D·Σ(w·dn·x).
#pragma omp parallel for if (N * D > parallel_min_elems) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const real* xr = x + n * D;
    const real* zr = z + n * D;
    const real* dyr = dy + n * D;
    const real r = row_rstd(xr, D, eps);
    rstd[static_cast<size_t>(n)] = r;
    double proj = 0.0;
    for (int64_t d = 0; d < D; ++d) {
      const real s = 1.f / (1.f + std::exp(-zr[d]));
      const real wdn = w[d] * dyr[d] * zr[d] * s;  // w·dn with silu(z) = z·σ(z)
      proj += static_cast<double>(wdn) * xr[d];
    }
    const real c = static_cast<real>(proj * r * r * r / static_cast<double>(D));
    for (int64_t d = 0; d < D; ++d) {
      const real s = 1.f / (1.f + std::exp(-zr[d]));
      const real normed = w[d] * (xr[d] * r);
      const real dyd = dyr[d];
      dz[n * D + d] = dyd * normed * s * (1.f + zr[d] * (1.f - s));
      dx[n * D + d] = r * (w[d] * dyd * zr[d] * s) - xr[d] * c;
    }
  }
  for (int64_t d = 0; d < D; ++d) {
    double acc = 0.0;
    for (int64_t n = 0; n < N; ++n)
      acc += static_cast<double>(dy[n * D + d] * (x[n * D + d] * rstd[static_cast<size_t>(n)]) * silu(z[n * D + d]));
    dw[d] += static_cast<real>(acc);
  }
}

}  // namespace mt::cpu
