// Helpers shared by the CPU ops: dot/axpy (`omp simd` lets the compiler vectorise fp32 sums) and BLAS dimension casts.
// Invariant: results depend only on the inputs and the build, never on the thread count.
#pragma once
#include <cstdint>
#include <limits>

#include "core/error.h"

namespace mt::cpu {

inline float dot(const float* a, const float* b, int64_t n) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// y += a * x
inline void axpy(float* y, float a, const float* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

// A matrix dimension as the int that cblas takes.
inline int blas_int(int64_t n) {
  MT_ASSERT(n >= 0 && n <= std::numeric_limits<int>::max(), "dimension {} out of BLAS range", n);
  return static_cast<int>(n);
}

// Elementwise loops only fork threads above this many elements.
inline constexpr int64_t parallel_min_elems = int64_t{1} << 15;

}  // namespace mt::cpu
