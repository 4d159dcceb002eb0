// Flat elementwise ops: add (y += x in T), scale (y *= alpha in T), add_scaled (y = y_scale·y + x_scale·x in T), cast (y = (Tout) x), accumulate (fp32 y += x).
// Invariant: math in fp32, one rounding to the output type; 16-byte accesses when every pointer is 16-byte aligned,
// scalar otherwise; grid-stride loops, so any n works.
#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int threads = 256;

// y[i] = op(y[i], x[i]) over n elements, N per access; the last n % N elements go one at a time.
template <typename Ty, typename Tx, int N, bool accumulate>
__global__ void map_kernel(Ty* y, const Tx* x, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t n_vec = n / N;
  for (int64_t v = first; v < n_vec; v += stride) {
    float a[N], b[N];
    load_f32<Tx, N>(b, x + v * N);
    if constexpr (accumulate) {
      load_f32<Ty, N>(a, y + v * N);
#pragma unroll
      for (int i = 0; i < N; ++i) a[i] += b[i];
    } else {
#pragma unroll
      for (int i = 0; i < N; ++i) a[i] = b[i];
    }
    store_f32<Ty, N>(y + v * N, a);
  }
  for (int64_t i = n_vec * N + first; i < n; i += stride) {
    y[i] = from_f32<Ty>(accumulate ? to_f32(y[i]) + to_f32(x[i]) : to_f32(x[i]));
  }
}

template <typename Ty, typename Tx, bool accumulate>
void launch_map(const char* op, Ty* y, const Tx* x, int64_t n, cudaStream_t s) {
  MT_ASSERT(n >= 0, "{}: n = {}", op, n);
  if (n == 0) return;
  constexpr int N = vec16<Ty> < vec16<Tx> ? vec16<Ty> : vec16<Tx>;
  if (is_aligned(y, N * sizeof(Ty)) && is_aligned(x, N * sizeof(Tx))) {
    map_kernel<Ty, Tx, N, accumulate><<<grid_for(n / N + 1, threads), threads, 0, s>>>(y, x, n);
  } else {
    map_kernel<Ty, Tx, 1, accumulate><<<grid_for(n, threads), threads, 0, s>>>(y, x, n);
  }
  MT_CHECK_LAUNCH(op, "n={}", n);
}

// y[i] = y[i]·alpha over n elements, N per access; the last n % N elements go one at a time.
template <typename T, int N>
__global__ void scale_kernel(T* y, float alpha, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t n_vec = n / N;
  for (int64_t v = first; v < n_vec; v += stride) {
    float a[N];
    load_f32<T, N>(a, y + v * N);
#pragma unroll
    for (int i = 0; i < N; ++i) a[i] *= alpha;
    store_f32<T, N>(y + v * N, a);
  }
  for (int64_t i = n_vec * N + first; i < n; i += stride) y[i] = from_f32<T>(to_f32(y[i]) * alpha);
}

// y[i] = y_scale·y[i] + x_scale·x[i], one element at a time.
template <typename T>
__global__ void add_scaled_kernel(T* y, const T* x, float x_scale, float y_scale, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = from_f32<T>(y_scale * to_f32(y[i]) + x_scale * to_f32(x[i]));
}

}  // namespace

template <typename T>
void add_scaled(T* y, const T* x, float x_scale, float y_scale, int64_t n, cudaStream_t s) {
  MT_ASSERT(n >= 0, "add_scaled: n = {}", n);
  if (n == 0) return;
  add_scaled_kernel<T><<<grid_for(n, threads), threads, 0, s>>>(y, x, x_scale, y_scale, n);
  MT_CHECK_LAUNCH("add_scaled", "n={} x_scale={} y_scale={}", n, x_scale, y_scale);
}

template <typename T>
void scale(T* y, float alpha, int64_t n, cudaStream_t s) {
  MT_ASSERT(n >= 0, "scale: n = {}", n);
  if (n == 0) return;
  constexpr int N = vec16<T>;
  if (is_aligned(y, 16)) {
    scale_kernel<T, N><<<grid_for(n / N + 1, threads), threads, 0, s>>>(y, alpha, n);
  } else {
    scale_kernel<T, 1><<<grid_for(n, threads), threads, 0, s>>>(y, alpha, n);
  }
  MT_CHECK_LAUNCH("scale", "n={} alpha={}", n, alpha);
}

template <typename T>
void add(T* y, const T* x, int64_t n, cudaStream_t s) {
  launch_map<T, T, true>("add", y, x, n, s);
}

template <typename Tout, typename Tin>
void cast(Tout* y, const Tin* x, int64_t n, cudaStream_t s) {
  launch_map<Tout, Tin, false>("cast", y, x, n, s);
}

void accumulate(float* y, const float* x, int64_t n, cudaStream_t s) {
  launch_map<float, float, true>("accumulate", y, x, n, s);
}

template void add<float>(float*, const float*, int64_t, cudaStream_t);
template void add<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, int64_t, cudaStream_t);
template void add_scaled<float>(float*, const float*, float, float, int64_t, cudaStream_t);
template void add_scaled<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, float, float, int64_t, cudaStream_t);
template void scale<float>(float*, float, int64_t, cudaStream_t);
template void scale<__nv_bfloat16>(__nv_bfloat16*, float, int64_t, cudaStream_t);
template void cast<float, float>(float*, const float*, int64_t, cudaStream_t);
template void cast<__nv_bfloat16, float>(__nv_bfloat16*, const float*, int64_t, cudaStream_t);
template void cast<float, __nv_bfloat16>(float*, const __nv_bfloat16*, int64_t, cudaStream_t);
template void cast<__nv_bfloat16, __nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, int64_t, cudaStream_t);

}  // namespace mt::cuda
