// Routed rows scaled by their routing weights (Llama 4's expert input w·x): xs[r] *= weights[source[r]]; backward in
// place on dxs: d_weights[source[r]] = x[source[r] / k]·dxs[r], then dxs[r] *= weights[source[r]].
// Invariant: one block per grouped row, each writing only its own row and its own d_weights entry (source is a
// permutation), the dot product reduced by cub's fixed-order block reduction: deterministic, no atomics.
#include <cub/block/block_reduce.cuh>

#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int threads = 256;

template <typename T>
__global__ void scale_rows_forward_kernel(T* xs, const float* weights, const int32_t* source, int64_t H) {
  const int64_t r = blockIdx.x;
  const float w = weights[source[r]];
  for (int64_t h = threadIdx.x; h < H; h += threads) xs[r * H + h] = from_f32<T>(to_f32(xs[r * H + h]) * w);
}

template <typename T>
__global__ void scale_rows_backward_kernel(T* dxs, float* d_weights, const T* x, const float* weights,
                                           const int32_t* source, int k, int64_t H) {
  const int64_t r = blockIdx.x;
  const int32_t routed = source[r];
  const T* xr = x + static_cast<int64_t>(routed / k) * H;
  const float w = weights[routed];
  float dot = 0.f;
  for (int64_t h = threadIdx.x; h < H; h += threads) {
    const float g = to_f32(dxs[r * H + h]);
    dot += to_f32(xr[h]) * g;
    dxs[r * H + h] = from_f32<T>(g * w);
  }
  using Reduce = cub::BlockReduce<float, threads>;
  __shared__ typename Reduce::TempStorage tmp;
  const float total = Reduce(tmp).Sum(dot);
  if (threadIdx.x == 0) d_weights[routed] = total;
}

}  // namespace

template <typename T>
void moe_scale_rows_forward(T* xs, const float* weights, const int32_t* source, int64_t rows, int64_t H,
                            cudaStream_t s) {
  MT_ASSERT(rows >= 0 && rows <= 0x7fffffff && H > 0, "moe_scale_rows_forward: rows {} H {}", rows, H);
  if (rows == 0) return;
  scale_rows_forward_kernel<T><<<static_cast<unsigned>(rows), threads, 0, s>>>(xs, weights, source, H);
  MT_CHECK_LAUNCH("moe_scale_rows_forward", "rows={} H={}", rows, H);
}

template <typename T>
void moe_scale_rows_backward(T* dxs, float* d_weights, const T* x, const float* weights, const int32_t* source,
                             int64_t rows, int64_t k, int64_t H, cudaStream_t s) {
  MT_ASSERT(rows >= 0 && rows <= 0x7fffffff && k > 0 && H > 0, "moe_scale_rows_backward: rows {} k {} H {}", rows, k,
            H);
  if (rows == 0) return;
  scale_rows_backward_kernel<T><<<static_cast<unsigned>(rows), threads, 0, s>>>(dxs, d_weights, x, weights, source,
                                                                               static_cast<int>(k), H);
  MT_CHECK_LAUNCH("moe_scale_rows_backward", "rows={} k={} H={}", rows, k, H);
}

template void moe_scale_rows_forward<float>(float*, const float*, const int32_t*, int64_t, int64_t, cudaStream_t);
template void moe_scale_rows_forward<__nv_bfloat16>(__nv_bfloat16*, const float*, const int32_t*, int64_t, int64_t,
                                                    cudaStream_t);
template void moe_scale_rows_backward<float>(float*, float*, const float*, const float*, const int32_t*, int64_t,
                                             int64_t, int64_t, cudaStream_t);
template void moe_scale_rows_backward<__nv_bfloat16>(__nv_bfloat16*, float*, const __nv_bfloat16*, const float*,
                                                     const int32_t*, int64_t, int64_t, int64_t, cudaStream_t);

}  // namespace mt::cuda
