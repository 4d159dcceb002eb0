// Routed rows scaled by their routing weights on the host (Llama 4's expert input w·x) and the backward of that scaling.
// Invariant: each grouped row is written by one iteration (source is a permutation of the routed rows), so the op is
// race-free and independent of the thread count; x·dxs sums in fp64.
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"

namespace mt::cpu {

void moe_scale_rows_forward(real* xs, const real* weights, const int32_t* source, int64_t R, int64_t H) {
  MT_ASSERT(R >= 0 && H > 0);
#pragma omp parallel for if (R * H > parallel_min_elems) schedule(static)
  for (int64_t r = 0; r < R; ++r) {
    const real w = weights[source[r]];
    real* row = xs + r * H;
#pragma omp simd
    for (int64_t h = 0; h < H; ++h) row[h] *= w;
  }
}

void moe_scale_rows_backward(real* dxs, real* d_weights, const real* x, const real* weights, const int32_t* source,
                             int64_t R, int64_t k, int64_t H) {
  MT_ASSERT(R >= 0 && k > 0 && H > 0);
#pragma omp parallel for if (R * H > parallel_min_elems) schedule(static)
  for (int64_t r = 0; r < R; ++r) {
    const int32_t routed = source[r];
    const real* xr = x + (routed / k) * H;
    real* row = dxs + r * H;
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int64_t h = 0; h < H; ++h) sum += static_cast<double>(xr[h]) * row[h];
    d_weights[routed] = static_cast<real>(sum);
    const real w = weights[routed];
#pragma omp simd
    for (int64_t h = 0; h < H; ++h) row[h] *= w;
  }
}

}  // namespace mt::cpu
