// Weightless RMS normalisation over rows of D, as Llama4TextL2Norm computes it in fp32: y = x · rsqrt(mean(x²) + eps).
// Invariant: mean(x²) is accumulated in fp64 and rounded once, as rmsnorm.cpp does; rows are independent, so results
// do not depend on the thread count.
#include <cmath>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"

namespace mt::cpu {

void rms_normalize_forward(real* y, const real* x, int64_t N, int64_t D, real eps) {
  MT_ASSERT(N >= 0 && D > 0 && eps >= 0.f);
#pragma omp parallel for if (N * D > parallel_min_elems) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const real* xr = x + n * D;
    real* yr = y + n * D;
    const real r = row_rstd(xr, D, eps);
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) yr[d] = xr[d] * r;
  }
}

// dx = r·dy − x·r³/D·Σ_d dy·x
void rms_normalize_backward(real* dx, const real* dy, const real* x, int64_t N, int64_t D, real eps) {
  MT_ASSERT(N >= 0 && D > 0 && eps >= 0.f);
#pragma omp parallel for if (N * D > parallel_min_elems) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const real* xr = x + n * D;
    const real* dyr = dy + n * D;
    real* dxr = dx + n * D;
    const real r = row_rstd(xr, D, eps);
    double proj = 0.0;
#pragma omp simd reduction(+ : proj)
    for (int64_t d = 0; d < D; ++d) proj += static_cast<double>(dyr[d]) * xr[d];
    const real c = static_cast<real>(proj * r * r * r / static_cast<double>(D));
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) dxr[d] = r * dyr[d] - xr[d] * c;
  }
}

}  // namespace mt::cpu
