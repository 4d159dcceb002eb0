// Row L2 normalisation y = x / max(‖x‖₂, 1e-12), as torch.nn.functional.normalize(x, dim=-1) (Baichuan's NormHead).
// Invariant: ‖x‖² is accumulated in fp64 and the norm rounded to fp32 before the clamp; the backward is the exact
// derivative of that forward, clamp branch included (below the clamp the denominator is the constant 1e-12, so
// dx += dy / 1e-12); rows are independent, so the result does not depend on the thread count.
#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"

namespace mt::cpu {
namespace {

constexpr real norm_eps = 1e-12f;  // torch's default eps, compared with the fp32 norm

real row_norm(const real* x, int64_t D) {
  double ss = 0.0;
#pragma omp simd reduction(+ : ss)
  for (int64_t d = 0; d < D; ++d) ss += static_cast<double>(x[d]) * x[d];
  return static_cast<real>(std::sqrt(ss));
}

}  // namespace

void normalize_rows_forward(real* y, const real* x, int64_t N, int64_t D) {
  MT_ASSERT(N >= 0 && D > 0);
#pragma omp parallel for if (N * D > parallel_min_elems) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const real* xr = x + n * D;
    real* yr = y + n * D;
    const real denom = std::max(row_norm(xr, D), norm_eps);
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) yr[d] = xr[d] / denom;
  }
}

// Unclamped (‖x‖ ≥ 1e-12, torch's clamp_min passes the gradient at equality): dx += (dy − y·(y·dy)) / ‖x‖.
// Clamped: y = x / 1e-12 and dx += dy / 1e-12.
void normalize_rows_backward(real* dx, const real* dy, const real* x, int64_t N, int64_t D) {
  MT_ASSERT(N >= 0 && D > 0);
#pragma omp parallel for if (N * D > parallel_min_elems) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const real* xr = x + n * D;
    const real* dyr = dy + n * D;
    real* dxr = dx + n * D;
    const real norm = row_norm(xr, D);
    if (norm < norm_eps) {
      const double inv = 1.0 / static_cast<double>(norm_eps);
      for (int64_t d = 0; d < D; ++d) dxr[d] += static_cast<real>(dyr[d] * inv);
      continue;
    }
    const double inv = 1.0 / static_cast<double>(norm);
    double y_dy = 0.0;  // y·dy
#pragma omp simd reduction(+ : y_dy)
    for (int64_t d = 0; d < D; ++d) y_dy += static_cast<double>(xr[d]) * dyr[d];
    y_dy *= inv;
    for (int64_t d = 0; d < D; ++d) {
      const double yd = static_cast<double>(xr[d]) * inv;
      dxr[d] += static_cast<real>((dyr[d] - yd * y_dy) * inv);
    }
  }
}

}  // namespace mt::cpu
