// RMSNorm over rows of D, as HF LlamaRMSNorm in fp32: y = (x · rsqrt(mean(x²) + eps)) · w, or · (w + offset) with
// a weight offset (Gemma's (1 + w), the fp32 sum formed first as Gemma2RMSNorm does).
// The backward adds a residual branch's gradient to dx in its own pass where given (the rounded dx plus it, as add).
// Invariant: mean(x²) is accumulated in fp64; dw accumulates over rows in row order (one writer per column); offset 0
// runs on w itself, so it is bitwise the plain LlamaRMSNorm.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"

namespace mt::cpu {

namespace {

// The weight the rows are scaled by: w itself at offset 0, else w + offset in `scratch`.
const real* effective_weight(const real* w, int64_t D, real offset, std::vector<real>& scratch) {
  if (offset == 0.f) return w;
  scratch.resize(static_cast<size_t>(D));
  for (int64_t d = 0; d < D; ++d) scratch[static_cast<size_t>(d)] = w[d] + offset;
  return scratch.data();
}

}  // namespace

void rmsnorm_forward(real* y, const real* x, const real* w_in, int64_t N, int64_t D, real eps,
                     real weight_offset) {
  MT_ASSERT(N >= 0 && D > 0);
  std::vector<real> scratch;
  const real* w = effective_weight(w_in, D, weight_offset, scratch);
#pragma omp parallel for if (N * D > parallel_min_elems) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const real* xr = x + n * D;
    real* yr = y + n * D;
    const real rstd = row_rstd(xr, D, eps);
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) yr[d] = (xr[d] * rstd) * w[d];
  }
}

void rmsnorm_backward(real* dx, real* dw, const real* dy, const real* x, const real* w_in, const real* residual,
                      int64_t N, int64_t D, real eps, real weight_offset) {
  MT_ASSERT(N >= 0 && D > 0);
  std::vector<real> scratch;
  const real* w = effective_weight(w_in, D, weight_offset, scratch);  // ∂(w + offset)/∂w = 1: dw keeps its form
  std::vector<real> rstd(static_cast<size_t>(N));
  // dx = rstd·(w·dy) − x·rstd³/D · Σ_d (w·dy·x)
#pragma omp parallel for if (N * D > parallel_min_elems) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const real* xr = x + n * D;
    const real* dyr = dy + n * D;
    real* dxr = dx + n * D;
    const real r = row_rstd(xr, D, eps);
    rstd[static_cast<size_t>(n)] = r;
    double proj = 0.0;
#pragma omp simd reduction(+ : proj)
    for (int64_t d = 0; d < D; ++d) proj += static_cast<double>(w[d] * dyr[d]) * xr[d];
    const real c = static_cast<real>(proj * r * r * r / static_cast<double>(D));
    if (residual) {  // each element's residual read before its dx is written: residual may be dx
      const real* res = residual + n * D;
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) dxr[d] = (r * (w[d] * dyr[d]) - xr[d] * c) + res[d];
    } else {
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) dxr[d] = r * (w[d] * dyr[d]) - xr[d] * c;
    }
  }
  // dw += Σ_n dy·x·rstd
  constexpr int64_t block = 256;
  const int64_t n_blocks = (D + block - 1) / block;
#pragma omp parallel for if (N * D > parallel_min_elems) schedule(static)
  for (int64_t cb = 0; cb < n_blocks; ++cb) {
    const int64_t d0 = cb * block, d1 = std::min(D, d0 + block);
    double acc[block] = {};
    for (int64_t n = 0; n < N; ++n) {
      const real r = rstd[static_cast<size_t>(n)];
      for (int64_t d = d0; d < d1; ++d) acc[d - d0] += static_cast<double>(dy[n * D + d] * (x[n * D + d] * r));
    }
    for (int64_t d = d0; d < d1; ++d) dw[d] += static_cast<real>(acc[d - d0]);
  }
}

}  // namespace mt::cpu
