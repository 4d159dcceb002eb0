// Per-expert bias of grouped rows (GPT-OSS's expert biases; semantics in backend.h): y[r, :] += b_e for the rows r of
// expert e, and its backward db_e += Σ of dy over expert e's rows (fp32), with offsets [E+1] in device memory.
// Invariant: forward is elementwise (each row finds its expert once, by binary search in offsets, and adds 16-byte
// vectors where the shapes allow); backward gives each (expert, column) to one thread that adds the expert's rows in
// row order, so db is deterministic, without atomics.
#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int threads = 256;

// The expert whose rows [offsets[e], offsets[e+1]) hold row r (experts without rows are skipped over).
__device__ __forceinline__ int expert_of(const int32_t* offsets, int E, int64_t r) {
  int lo = 0, hi = E - 1;
  while (lo < hi) {  // the last e with offsets[e] <= r
    const int mid = (lo + hi + 1) / 2;
    if (offsets[mid] <= r) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// Block-strided rows: each row finds its expert once, then its threads add the bias N columns at a time.
template <typename T, int N>
__global__ void grouped_bias_forward_kernel(T* __restrict__ y, const T* __restrict__ b, int64_t b_stride,
                                            const int32_t* __restrict__ offsets, int E, int64_t R, int64_t O) {
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const T* be = b + static_cast<int64_t>(expert_of(offsets, E, r)) * b_stride;
    T* row = y + r * O;
    for (int64_t c = static_cast<int64_t>(threadIdx.x) * N; c < O; c += static_cast<int64_t>(blockDim.x) * N) {
      float v[N], add[N];
      load_f32<T, N>(v, row + c);
      load_f32<T, N>(add, be + c);
#pragma unroll
      for (int i = 0; i < N; ++i) v[i] += add[i];
      store_f32<T, N>(row + c, v);
    }
  }
}

// Block (column tile, expert): thread o sums column o of the expert's rows in row order.
template <typename T>
__global__ void grouped_bias_backward_kernel(float* __restrict__ db, const T* __restrict__ dy, int64_t b_stride,
                                             const int32_t* __restrict__ offsets, int64_t O) {
  const int e = static_cast<int>(blockIdx.y);
  const int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (o >= O) return;
  float acc = 0.f;
  for (int64_t r = offsets[e]; r < offsets[e + 1]; ++r) acc += to_f32(dy[r * O + o]);
  db[e * b_stride + o] += acc;
}

}  // namespace

template <typename T>
void grouped_bias_forward(T* y, const T* b, int64_t b_stride, const int32_t* offsets, int64_t E, int64_t R, int64_t O,
                          cudaStream_t s) {
  MT_ASSERT(E > 0 && E <= 65535 && R >= 0 && O > 0 && b_stride >= O, "grouped_bias_forward: E {} R {} O {} stride {}",
            E, R, O, b_stride);
  if (R == 0) return;
  constexpr int N = vec16<T>;
  const unsigned grid = grid_for(R * threads, threads);
  if (vec_ok(N, {O, b_stride}, {y, b}))
    grouped_bias_forward_kernel<T, N><<<grid, threads, 0, s>>>(y, b, b_stride, offsets, static_cast<int>(E), R, O);
  else
    grouped_bias_forward_kernel<T, 1><<<grid, threads, 0, s>>>(y, b, b_stride, offsets, static_cast<int>(E), R, O);
  MT_CHECK_LAUNCH("grouped_bias_forward", "E={} R={} O={}", E, R, O);
}

template <typename T>
void grouped_bias_backward(float* db, const T* dy, int64_t b_stride, const int32_t* offsets, int64_t E, int64_t R,
                           int64_t O, cudaStream_t s) {
  MT_ASSERT(E > 0 && E <= 65535 && R >= 0 && O > 0 && b_stride >= O, "grouped_bias_backward: E {} R {} O {} stride {}",
            E, R, O, b_stride);
  if (R == 0) return;
  const dim3 grid(static_cast<unsigned>((O + threads - 1) / threads), static_cast<unsigned>(E));
  grouped_bias_backward_kernel<T><<<grid, threads, 0, s>>>(db, dy, b_stride, offsets, O);
  MT_CHECK_LAUNCH("grouped_bias_backward", "E={} R={} O={}", E, R, O);
}

template void grouped_bias_forward<float>(float*, const float*, int64_t, const int32_t*, int64_t, int64_t, int64_t,
                                          cudaStream_t);
template void grouped_bias_forward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, int64_t, const int32_t*,
                                                  int64_t, int64_t, int64_t, cudaStream_t);
template void grouped_bias_backward<float>(float*, const float*, int64_t, const int32_t*, int64_t, int64_t, int64_t,
                                           cudaStream_t);
template void grouped_bias_backward<__nv_bfloat16>(float*, const __nv_bfloat16*, int64_t, const int32_t*, int64_t,
                                                   int64_t, int64_t, cudaStream_t);

}  // namespace mt::cuda
