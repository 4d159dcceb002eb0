// SwiGLU gating y = silu(g)·u with silu(g) = g / (1 + exp(−g)), and its backward dg, du (overwritten).
// Invariant: the CPU reference's formulas in fp32 (expf, IEEE division); 16-byte accesses when every pointer is
// 16-byte aligned, scalar otherwise; grid-stride, any n.
#include "kernels/device_util.cuh"
#include "kernels/kernels.h"
#include "kernels/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int threads = 256;

template <typename T, int N>
__global__ void swiglu_forward_kernel(T* __restrict__ y, const T* __restrict__ g, const T* __restrict__ u, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v * N < n; v += stride) {
    float gv[N], uv[N], yv[N];
    load_f32<T, N>(gv, g + v * N);
    load_f32<T, N>(uv, u + v * N);
#pragma unroll
    for (int i = 0; i < N; ++i) yv[i] = (gv[i] / (1.f + expf(-gv[i]))) * uv[i];
    store_f32<T, N>(y + v * N, yv);
  }
}

template <typename T, int N>
__global__ void swiglu_backward_kernel(T* __restrict__ dg, T* __restrict__ du, const T* __restrict__ dy,
                                       const T* __restrict__ g, const T* __restrict__ u, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v * N < n; v += stride) {
    float dyv[N], gv[N], uv[N], dgv[N], duv[N];
    load_f32<T, N>(dyv, dy + v * N);
    load_f32<T, N>(gv, g + v * N);
    load_f32<T, N>(uv, u + v * N);
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const float e = expf(-gv[i]);
      const float sig = 1.f / (1.f + e);
      dgv[i] = dyv[i] * uv[i] * (sig * (1.f + gv[i] * (1.f - sig)));
      duv[i] = dyv[i] * (gv[i] / (1.f + e));
    }
    store_f32<T, N>(dg + v * N, dgv);
    store_f32<T, N>(du + v * N, duv);
  }
}

}  // namespace

template <typename T>
void swiglu_forward(T* y, const T* g, const T* u, int64_t n, cudaStream_t s) {
  MT_ASSERT(n >= 0, "swiglu_forward: n = {}", n);
  if (n == 0) return;
  constexpr int N = vec16<T>;
  if (vec_ok(N, {n}, {y, g, u})) {
    swiglu_forward_kernel<T, N><<<grid_for(n / N, threads), threads, 0, s>>>(y, g, u, n);
  } else {
    swiglu_forward_kernel<T, 1><<<grid_for(n, threads), threads, 0, s>>>(y, g, u, n);
  }
  MT_CHECK_LAUNCH("swiglu_forward", "n={}", n);
}

template <typename T>
void swiglu_backward(T* dg, T* du, const T* dy, const T* g, const T* u, int64_t n, cudaStream_t s) {
  MT_ASSERT(n >= 0, "swiglu_backward: n = {}", n);
  if (n == 0) return;
  constexpr int N = vec16<T>;
  if (vec_ok(N, {n}, {dg, du, dy, g, u})) {
    swiglu_backward_kernel<T, N><<<grid_for(n / N, threads), threads, 0, s>>>(dg, du, dy, g, u, n);
  } else {
    swiglu_backward_kernel<T, 1><<<grid_for(n, threads), threads, 0, s>>>(dg, du, dy, g, u, n);
  }
  MT_CHECK_LAUNCH("swiglu_backward", "n={}", n);
}

template void swiglu_forward<float>(float*, const float*, const float*, int64_t, cudaStream_t);
template void swiglu_forward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, int64_t,
                                            cudaStream_t);
template void swiglu_backward<float>(float*, float*, const float*, const float*, const float*, int64_t, cudaStream_t);
template void swiglu_backward<__nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, const __nv_bfloat16*,
                                             const __nv_bfloat16*, const __nv_bfloat16*, int64_t, cudaStream_t);

}  // namespace mt::cuda
