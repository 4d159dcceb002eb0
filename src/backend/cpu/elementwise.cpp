// zero, copy, add, scale, add_scaled (y = y_scale·y + x_scale·x) and the fp64 sum of squares over flat buffers of mt::real.
// Invariant: sum_squares adds fixed-size block partials in block order, so it is bitwise independent of thread count.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"
#include "core/error.h"

namespace mt::cpu {

void zero(real* p, int64_t n) {
  MT_ASSERT(n >= 0);
  if (n > 0) std::memset(p, 0, sizeof(real) * static_cast<size_t>(n));
}

void copy(real* dst, const real* src, int64_t n) {
  MT_ASSERT(n >= 0);
  if (n > 0 && dst != src) std::memmove(dst, src, sizeof(real) * static_cast<size_t>(n));
}

void add(real* y, const real* x, int64_t n) {
#pragma omp parallel for simd if (n > parallel_min_elems) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void scale(real* y, real alpha, int64_t n) {
#pragma omp parallel for simd if (n > parallel_min_elems) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] *= alpha;
}

void add_scaled(real* y, const real* x, real x_scale, real y_scale, int64_t n) {
#pragma omp parallel for simd if (n > parallel_min_elems) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = y_scale * y[i] + x_scale * x[i];
}

double sum_squares(const real* x, int64_t n) {
  constexpr int64_t block = 4096;
  const int64_t n_blocks = (n + block - 1) / block;
  std::vector<double> partial(static_cast<size_t>(n_blocks));
#pragma omp parallel for if (n > parallel_min_elems) schedule(static)
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t end = std::min(n, (b + 1) * block);
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = b * block; i < end; ++i) s += static_cast<double>(x[i]) * x[i];
    partial[static_cast<size_t>(b)] = s;
  }
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace mt::cpu
