// AdamW on device memory for the GPU-resident regions (kernels/runtime/resident_regions.h): p, m, v ← p', m', v' and
// optionally the bf16 compute copy, in place.
// Invariant: each element takes exactly the IEEE operations of the host passes (optim/adamw.h's AdamWCoefficients
// order), through the _rn intrinsics, which nvcc never contracts into fused multiply-adds, so the results are
// bitwise those of adamw_update on the CPU; the bf16 copy rounds as cast() does.
#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int threads = 256;

template <bool kCopy>
__global__ void __launch_bounds__(threads) adamw_kernel(float* __restrict__ p, float* __restrict__ m,
                                                        float* __restrict__ v, const float* __restrict__ g,
                                                        __nv_bfloat16* __restrict__ copy, int64_t n,
                                                        AdamWCoefficients c) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * threads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * threads + threadIdx.x; i < n; i += stride) {
    const float gi = __fmul_rn(g[i], c.scale);
    const float mi = __fadd_rn(m[i], __fmul_rn(c.m_weight, __fsub_rn(gi, m[i])));
    const float vi = __fadd_rn(__fmul_rn(v[i], c.v_decay), __fmul_rn(__fmul_rn(c.v_weight, gi), gi));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), c.bc2_sqrt), c.eps);
    const float pi = __fadd_rn(__fmul_rn(p[i], c.decay_factor), __fdiv_rn(__fmul_rn(c.neg_step_size, mi), denom));
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
    if constexpr (kCopy) copy[i] = from_f32<__nv_bfloat16>(pi);
  }
}

}  // namespace

void adamw_update(float* p, float* m, float* v, const float* g, __nv_bfloat16* copy, int64_t n,
                  const AdamWCoefficients& c, cudaStream_t s) {
  MT_ASSERT(n >= 0, "adamw_update: n = {}", n);
  if (n == 0) return;
  const int blocks = grid_for(n, threads);
  if (copy)
    adamw_kernel<true><<<blocks, threads, 0, s>>>(p, m, v, g, copy, n, c);
  else
    adamw_kernel<false><<<blocks, threads, 0, s>>>(p, m, v, g, nullptr, n, c);
  MT_CHECK_LAUNCH("adamw_update", "n={}", n);
}

}  // namespace mt::cuda
