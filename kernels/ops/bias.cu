// Bias add y[t, o] += b[o] over [tokens, O], and its backward db[o] += scale·Σ_t dy[t, o] (fp32 output; scale: the
// gradient's residual multiplier, 1 elsewhere).
// Invariant: forward is elementwise (16-byte accesses when O and the pointers allow); backward sums in fp64 in a fixed
// order through column_sum.cuh, so db is deterministic.
#include "kernels/ops/column_sum.cuh"
#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int threads = 256;

template <typename T, int N>
__global__ void bias_forward_kernel(T* __restrict__ y, const T* __restrict__ b, int64_t n, int64_t O) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v * N < n; v += stride) {
    float yv[N], bv[N];
    load_f32<T, N>(yv, y + v * N);
    load_f32<T, N>(bv, b + (v * N) % O);
#pragma unroll
    for (int i = 0; i < N; ++i) yv[i] += bv[i];
    store_f32<T, N>(y + v * N, yv);
  }
}

template <typename T>
struct bias_summand {
  const T* dy;
  int64_t O;
  double scale;
  __device__ double operator()(int64_t t, int64_t o) const { return scale * static_cast<double>(to_f32(dy[t * O + o])); }
};

}  // namespace

template <typename T>
void bias_forward(T* y, const T* b, int64_t tokens, int64_t O, cudaStream_t s) {
  MT_ASSERT(tokens >= 0 && O > 0, "bias_forward: tokens {} O {}", tokens, O);
  const int64_t n = tokens * O;
  if (n == 0) return;
  constexpr int N = vec16<T>;
  if (vec_ok(N, {O}, {y, b})) {
    bias_forward_kernel<T, N><<<grid_for(n / N, threads), threads, 0, s>>>(y, b, n, O);
  } else {
    bias_forward_kernel<T, 1><<<grid_for(n, threads), threads, 0, s>>>(y, b, n, O);
  }
  MT_CHECK_LAUNCH("bias_forward", "tokens={} O={}", tokens, O);
}

template <typename T>
void bias_backward(float* db, const T* dy, int64_t tokens, int64_t O, float scale, cudaStream_t s) {
  MT_ASSERT(tokens >= 0 && O > 0, "bias_backward: tokens {} O {}", tokens, O);
  column_sum_accumulate("bias_backward", db, tokens, O, bias_summand<T>{dy, O, scale}, s);
}

template void bias_forward<float>(float*, const float*, int64_t, int64_t, cudaStream_t);
template void bias_forward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, int64_t, int64_t, cudaStream_t);
template void bias_backward<float>(float*, const float*, int64_t, int64_t, float, cudaStream_t);
template void bias_backward<__nv_bfloat16>(float*, const __nv_bfloat16*, int64_t, int64_t, float, cudaStream_t);

}  // namespace mt::cuda
