// Helpers shared by the CPU ops: dot/axpy (`omp simd` lets the compiler vectorise the sums), a row's RMS, BLAS
// dimension casts, and strided rows of elementwise ops.
// Invariant: results depend only on the inputs and the build, never on the thread count.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/error.h"
#include "core/real.h"

namespace mt::cpu {

inline real sigmoid(real x) { return 1.f / (1.f + std::exp(-x)); }

inline real dot(const real* a, const real* b, int64_t n) {
  real s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// y += a * x
inline void axpy(real* y, real a, const real* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

// 1 / sqrt(mean(x²) + eps) of a row of D, mean(x²) accumulated in fp64 and rounded once (rmsnorm.cpp,
// rms_normalize.cpp, gated_rmsnorm.cpp).
inline real row_rstd(const real* x, int64_t D, real eps) {
  double ss = 0.0;
#pragma omp simd reduction(+ : ss)
  for (int64_t d = 0; d < D; ++d) ss += static_cast<double>(x[d]) * x[d];
  return 1.f / std::sqrt(static_cast<real>(ss / static_cast<double>(D)) + eps);
}

// A matrix dimension as the int that cblas takes.
inline int blas_int(int64_t n) {
  MT_ASSERT(n >= 0 && n <= std::numeric_limits<int>::max(), "dimension {} out of BLAS range", n);
  return static_cast<int>(n);
}

// Elementwise loops only fork threads above this many elements.
inline constexpr int64_t parallel_min_elems = int64_t{1} << 15;

// rows × cols elements of a dense [rows, cols] operand whose partner operands' rows lie ld ≥ cols apart (the glu ops'
// gate and up): element i of the dense one sits at at(i) of the strided ones.
struct StridedRows {
  int64_t n = 0, cols = 1, ld = 1;
  StridedRows(const char* op, int64_t rows, int64_t cols_, int64_t ld_) : n(rows * cols_), cols(cols_), ld(ld_) {
    MT_ASSERT(rows >= 0 && cols_ >= 0 && ld_ >= cols_, "{}: rows {} cols {} ld {}", op, rows, cols_, ld_);
    if (cols == 0) cols = ld = 1;  // no elements
  }
  int64_t at(int64_t i) const { return ld == cols ? i : i / cols * ld + i % cols; }
};

}  // namespace mt::cpu
