// LayerNorm over rows of D, as nn.LayerNorm and CohereLayerNorm compute it in fp32: y = ((x − mean)·rstd)·w + b with
// rstd = 1/sqrt(var + eps), var the biased variance; row r takes weight (and bias) row r % weight_rows. The backward
// adds a residual branch's gradient to dx in its own pass where given.
// Invariant: mean and variance (two passes) and the backward's row sums are accumulated in fp64; dw and db accumulate
// over rows in row order (one writer per column of the [weight_rows, D] weight).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"

namespace mt::cpu {

namespace {

struct RowStats {
  real mean = 0.f, rstd = 0.f;
};

RowStats row_stats(const real* x, int64_t D, real eps) {
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t d = 0; d < D; ++d) sum += x[d];
  const auto mean = static_cast<real>(sum / static_cast<double>(D));
  double ss = 0.0;
#pragma omp simd reduction(+ : ss)
  for (int64_t d = 0; d < D; ++d) {
    const double c = static_cast<double>(x[d] - mean);
    ss += c * c;
  }
  return {mean, 1.f / std::sqrt(static_cast<real>(ss / static_cast<double>(D)) + eps)};
}

}  // namespace

void layernorm_forward(real* y, const real* x, const real* w, const real* b, int64_t N, int64_t D,
                       int64_t weight_rows, real eps) {
  MT_ASSERT(N >= 0 && D > 0 && weight_rows > 0 && N % weight_rows == 0, "layernorm_forward: N {} D {} weight_rows {}",
            N, D, weight_rows);
#pragma omp parallel for if (N * D > parallel_min_elems) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const real* xr = x + n * D;
    real* yr = y + n * D;
    const real* wr = w + (n % weight_rows) * D;
    const RowStats s = row_stats(xr, D, eps);
    if (b) {
      const real* br = b + (n % weight_rows) * D;
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) yr[d] = ((xr[d] - s.mean) * s.rstd) * wr[d] + br[d];
    } else {
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) yr[d] = ((xr[d] - s.mean) * s.rstd) * wr[d];
    }
  }
}

void layernorm_backward(real* dx, real* dw, real* db, const real* dy, const real* x, const real* w,
                        const real* residual, int64_t N, int64_t D, int64_t weight_rows, real eps) {
  MT_ASSERT(N >= 0 && D > 0 && weight_rows > 0 && N % weight_rows == 0, "layernorm_backward: N {} D {} weight_rows {}",
            N, D, weight_rows);
  std::vector<RowStats> stats(static_cast<size_t>(N));
  // With x̂ = (x − mean)·rstd and g = w·dy: dx = rstd·(g − mean(g) − x̂·mean(g·x̂)).
#pragma omp parallel for if (N * D > parallel_min_elems) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const real* xr = x + n * D;
    const real* dyr = dy + n * D;
    const real* wr = w + (n % weight_rows) * D;
    real* dxr = dx + n * D;
    const RowStats s = row_stats(xr, D, eps);
    stats[static_cast<size_t>(n)] = s;
    double sum_g = 0.0, sum_gx = 0.0;
#pragma omp simd reduction(+ : sum_g, sum_gx)
    for (int64_t d = 0; d < D; ++d) {
      const real g = wr[d] * dyr[d];
      sum_g += g;
      sum_gx += static_cast<double>(g) * ((xr[d] - s.mean) * s.rstd);
    }
    const auto mean_g = static_cast<real>(sum_g / static_cast<double>(D));
    const auto mean_gx = static_cast<real>(sum_gx / static_cast<double>(D));
    const real* res = residual ? residual + n * D : nullptr;  // read element by element before dx: may be dx
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) {
      const real v = s.rstd * ((wr[d] * dyr[d] - mean_g) - ((xr[d] - s.mean) * s.rstd) * mean_gx);
      dxr[d] = res ? v + res[d] : v;
    }
  }
  // dw[g] += Σ_{n ≡ g} dy·x̂, db[g] += Σ_{n ≡ g} dy: the rows as [N / weight_rows, weight_rows·D] columns.
  const int64_t width = weight_rows * D, rows = N / weight_rows;
  constexpr int64_t block = 256;
  const int64_t n_blocks = (width + block - 1) / block;
#pragma omp parallel for if (N * D > parallel_min_elems) schedule(static)
  for (int64_t cb = 0; cb < n_blocks; ++cb) {
    const int64_t c0 = cb * block, c1 = std::min(width, c0 + block);
    double acc_w[block] = {}, acc_b[block] = {};
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t n = r * weight_rows + c / D;
        const RowStats& s = stats[static_cast<size_t>(n)];
        const real g = dy[r * width + c];
        acc_w[c - c0] += static_cast<double>(g * ((x[r * width + c] - s.mean) * s.rstd));
        acc_b[c - c0] += g;
      }
    for (int64_t c = c0; c < c1; ++c) {
      dw[c] += static_cast<real>(acc_w[c - c0]);
      if (db) db[c] += static_cast<real>(acc_b[c - c0]);
    }
  }
}

}  // namespace mt::cpu
