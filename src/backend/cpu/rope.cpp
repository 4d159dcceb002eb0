// Rotary position embedding in place on x[T, n_heads, head_dim] on the first rot_dim dims, pairing dims as HF
// rotate_half does, (x[i], x[i + rot_dim/2]), or interleaved as GLM does, (x[2i], x[2i+1]); pair i turns by the
// angle of table column i either way.
// Invariant: backward applies the transpose of the forward rotation (its inverse when cos² + sin² = 1); dims
// rot_dim..head_dim pass through untouched.
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"

namespace mt::cpu {

// Pair (a, b) = (x[i], x[i+half]) or (x[2i], x[2i+1]): a ← a·c − b·s', b ← b·c + a·s' with s' = sign·s; sign +1
// forward, −1 transpose.
static void rotate(real* x, const real* cos, const real* sin, const int32_t* positions, int64_t T,
                   int64_t n_heads, int64_t head_dim, int64_t rot_dim, bool interleaved, real sign) {
  MT_ASSERT(T >= 0 && n_heads > 0 && head_dim > 0);
  MT_ASSERT(rot_dim > 0 && rot_dim % 2 == 0 && rot_dim <= head_dim, "rot_dim {} head_dim {}", rot_dim, head_dim);
  const int64_t half = rot_dim / 2;
  for (int64_t t = 0; t < T; ++t) MT_ASSERT(positions[t] >= 0, "negative position {} at token {}", positions[t], t);
#pragma omp parallel for if (T * n_heads * head_dim > parallel_min_elems) schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    const real* c = cos + static_cast<int64_t>(positions[t]) * half;
    const real* s = sin + static_cast<int64_t>(positions[t]) * half;
    for (int64_t h = 0; h < n_heads; ++h) {
      if (interleaved) {
        real* xh = x + (t * n_heads + h) * head_dim;
#pragma omp simd
        for (int64_t i = 0; i < half; ++i) {
          const real a = xh[2 * i], b = xh[2 * i + 1], si = sign * s[i];
          xh[2 * i] = a * c[i] - b * si;
          xh[2 * i + 1] = b * c[i] + a * si;
        }
        continue;
      }
      real* lo = x + (t * n_heads + h) * head_dim;
      real* hi = lo + half;
#pragma omp simd
      for (int64_t i = 0; i < half; ++i) {
        const real a = lo[i], b = hi[i], si = sign * s[i];
        lo[i] = a * c[i] - b * si;
        hi[i] = b * c[i] + a * si;
      }
    }
  }
}

void rope_forward(real* x, const real* cos, const real* sin, const int32_t* positions, int64_t T,
                  int64_t n_heads, int64_t head_dim, int64_t rot_dim, bool interleaved) {
  rotate(x, cos, sin, positions, T, n_heads, head_dim, rot_dim, interleaved, 1.f);
}

void rope_backward(real* dx, const real* cos, const real* sin, const int32_t* positions, int64_t T,
                   int64_t n_heads, int64_t head_dim, int64_t rot_dim, bool interleaved) {
  rotate(dx, cos, sin, positions, T, n_heads, head_dim, rot_dim, interleaved, -1.f);
}

}  // namespace mt::cpu
