// Full reductions of n floats into one fp64 in device memory: out[0] = Σ x² (sum_squares) or Σ x (sum).
// Invariant: deterministic two-stage reduction in fp64: a block count that depends only on n, each block's partial
// in a fixed order (grid-stride, warp butterfly, warps in order), then one block adds the partials in order.
#include <algorithm>

#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int threads = 256;
constexpr int max_blocks = 1024;

// Sum over the block in a fixed order; the result is valid in thread 0.
__device__ double block_sum(double x) {
  __shared__ double warp_part[threads / 32];
  x = warp_sum(x);
  if (threadIdx.x % 32 == 0) warp_part[threadIdx.x / 32] = x;
  __syncthreads();
  double total = 0.0;
  if (threadIdx.x == 0) {
    for (int w = 0; w < threads / 32; ++w) total += warp_part[w];
  }
  return total;
}

template <bool square>
__device__ __forceinline__ double term(float x) {
  return square ? static_cast<double>(x) * x : static_cast<double>(x);
}

// partial[block] = Σ term(x) over the block's grid-stride share; float4 reads when vec.
template <bool square, bool vec>
__global__ void __launch_bounds__(threads) reduce_partial_kernel(double* partial, const float* __restrict__ x,
                                                                 int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * threads;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * threads + threadIdx.x;
  double acc = 0.0;
  int64_t tail = 0;
  if constexpr (vec) {
    for (int64_t v = first; v < n / 4; v += stride) {
      const float4 f = reinterpret_cast<const float4*>(x)[v];
      acc += term<square>(f.x) + term<square>(f.y) + term<square>(f.z) + term<square>(f.w);
    }
    tail = n / 4 * 4;
  }
  for (int64_t i = tail + first; i < n; i += stride) acc += term<square>(x[i]);
  const double total = block_sum(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

__global__ void __launch_bounds__(threads) reduce_finish_kernel(double* out, const double* __restrict__ partial,
                                                                int blocks) {
  double acc = 0.0;
  for (int i = threadIdx.x; i < blocks; i += threads) acc += partial[i];
  const double total = block_sum(acc);
  if (threadIdx.x == 0) out[0] = total;
}

template <bool square>
void reduce(const char* op, double* out, const float* x, int64_t n, cudaStream_t s) {
  MT_ASSERT(n >= 0, "{}: n = {}", op, n);
  const int blocks = static_cast<int>(std::clamp<int64_t>((n + threads * 16 - 1) / (threads * 16), 1, max_blocks));
  Scratch<double> partial(op, blocks, s);
  if (is_aligned(x, 16)) {
    reduce_partial_kernel<square, true><<<blocks, threads, 0, s>>>(partial.get(), x, n);
  } else {
    reduce_partial_kernel<square, false><<<blocks, threads, 0, s>>>(partial.get(), x, n);
  }
  MT_CHECK_LAUNCH(op, "partials n={}", n);
  reduce_finish_kernel<<<1, threads, 0, s>>>(out, partial.get(), blocks);
  MT_CHECK_LAUNCH(op, "finish n={}", n);
}

}  // namespace

void sum_squares(double* out, const float* x, int64_t n, cudaStream_t s) { reduce<true>("sum_squares", out, x, n, s); }

void sum(double* out, const float* x, int64_t n, cudaStream_t s) { reduce<false>("sum", out, x, n, s); }

}  // namespace mt::cuda
