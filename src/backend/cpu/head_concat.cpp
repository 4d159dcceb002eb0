// Per-head concatenation of two parts (multi-head latent attention's [nope | rope] queries and keys), forward and
// backward. Invariant: one token row per task; a shared part's gradient sums the heads in order, in fp32.
#include <algorithm>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace mt::cpu {

void head_concat_forward(real* y, const real* a, const real* b, int64_t T, int64_t H, int64_t a_dim, int64_t b_dim,
                         bool shared_b) {
  MT_ASSERT(T >= 0 && H > 0 && a_dim >= 0 && b_dim >= 0);
  const int64_t d = a_dim + b_dim, b_stride = shared_b ? b_dim : H * b_dim;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      real* yh = y + (t * H + h) * d;
      const real* ah = a + (t * H + h) * a_dim;
      const real* bh = b + t * b_stride + (shared_b ? 0 : h * b_dim);
      std::copy(ah, ah + a_dim, yh);
      std::copy(bh, bh + b_dim, yh + a_dim);
    }
}

void head_concat_backward(real* da, real* db, const real* dy, int64_t T, int64_t H, int64_t a_dim, int64_t b_dim,
                          bool shared_b) {
  MT_ASSERT(T >= 0 && H > 0 && a_dim >= 0 && b_dim >= 0);
  const int64_t d = a_dim + b_dim;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    if (shared_b) std::fill_n(db + t * b_dim, b_dim, 0.f);
    for (int64_t h = 0; h < H; ++h) {
      const real* dyh = dy + (t * H + h) * d;
      std::copy(dyh, dyh + a_dim, da + (t * H + h) * a_dim);
      if (shared_b) {
        real* dbt = db + t * b_dim;
        for (int64_t i = 0; i < b_dim; ++i) dbt[i] += dyh[a_dim + i];
      } else {
        std::copy(dyh + a_dim, dyh + d, db + (t * H + h) * b_dim);
      }
    }
  }
}

}  // namespace mt::cpu
