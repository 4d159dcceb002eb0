// HF RMSNorm over rows of D: y = T(x·rstd)·w with rstd = 1/sqrt(mean(x²) + eps); backward dx =, dw += (fp32).
// Invariant: one warp per row, mean(x²) and the backward projection summed in fp64 as the CPU reference does; the
// normalised value rounds to T before the weight multiply (HF's order; a no-op for fp32); dw sums in a fixed order.
#include "kernels/column_sum.cuh"
#include "kernels/device_util.cuh"
#include "kernels/kernels.h"
#include "kernels/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int warps_per_block = 8;

__device__ __forceinline__ float rstd_of(double sum_sq, int64_t D, float eps) {
  return 1.f / sqrtf(static_cast<float>(sum_sq / static_cast<double>(D)) + eps);
}

template <typename T, int N>
__global__ void rmsnorm_forward_kernel(T* __restrict__ y, const T* __restrict__ x, const T* __restrict__ w,
                                       int64_t rows, int64_t D, float eps) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * warps_per_block + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const T* xr = x + row * D;
  T* yr = y + row * D;
  double ss = 0.0;
  for (int64_t d = lane * N; d < D; d += 32 * N) {
    float xv[N];
    load_f32<T, N>(xv, xr + d);
#pragma unroll
    for (int k = 0; k < N; ++k) ss += static_cast<double>(xv[k]) * xv[k];
  }
  const float r = rstd_of(warp_sum(ss), D, eps);
  for (int64_t d = lane * N; d < D; d += 32 * N) {
    float xv[N], wv[N];
    load_f32<T, N>(xv, xr + d);
    load_f32<T, N>(wv, w + d);
#pragma unroll
    for (int k = 0; k < N; ++k) xv[k] = to_f32(from_f32<T>(xv[k] * r)) * wv[k];
    store_f32<T, N>(yr + d, xv);
  }
}

// dx = r·(w·dy) − x·r³/D·Σ(w·dy·x); also saves r per row for the dw pass.
template <typename T, int N>
__global__ void rmsnorm_backward_dx_kernel(T* __restrict__ dx, float* __restrict__ rstd, const T* __restrict__ dy,
                                           const T* __restrict__ x, const T* __restrict__ w, int64_t rows, int64_t D,
                                           float eps) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * warps_per_block + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const T* xr = x + row * D;
  const T* dyr = dy + row * D;
  double ss = 0.0, proj = 0.0;
  for (int64_t d = lane * N; d < D; d += 32 * N) {
    float xv[N], dyv[N], wv[N];
    load_f32<T, N>(xv, xr + d);
    load_f32<T, N>(dyv, dyr + d);
    load_f32<T, N>(wv, w + d);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      ss += static_cast<double>(xv[k]) * xv[k];
      proj += static_cast<double>(wv[k] * dyv[k]) * xv[k];
    }
  }
  const float r = rstd_of(warp_sum(ss), D, eps);
  const float c = static_cast<float>(warp_sum(proj) * r * r * r / static_cast<double>(D));
  T* dxr = dx + row * D;
  for (int64_t d = lane * N; d < D; d += 32 * N) {
    float xv[N], dyv[N], wv[N];
    load_f32<T, N>(xv, xr + d);
    load_f32<T, N>(dyv, dyr + d);
    load_f32<T, N>(wv, w + d);
#pragma unroll
    for (int k = 0; k < N; ++k) xv[k] = r * (wv[k] * dyv[k]) - xv[k] * c;
    store_f32<T, N>(dxr + d, xv);
  }
  if (lane == 0) rstd[row] = r;
}

// dw summand dy·(x·r), as the CPU reference rounds it.
template <typename T>
struct dw_summand {
  const T* dy;
  const T* x;
  const float* rstd;
  int64_t D;
  __device__ double operator()(int64_t n, int64_t d) const {
    return static_cast<double>(to_f32(dy[n * D + d]) * (to_f32(x[n * D + d]) * rstd[n]));
  }
};

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>((rows + warps_per_block - 1) / warps_per_block); }

}  // namespace

template <typename T>
void rmsnorm_forward(T* y, const T* x, const T* w, int64_t N, int64_t D, float eps, cudaStream_t s) {
  MT_ASSERT(N >= 0 && D > 0, "rmsnorm_forward: N {} D {}", N, D);
  if (N == 0) return;
  constexpr int V = vec16<T>;
  if (vec_ok(V, {D}, {y, x, w})) {
    rmsnorm_forward_kernel<T, V><<<row_blocks(N), 32 * warps_per_block, 0, s>>>(y, x, w, N, D, eps);
  } else {
    rmsnorm_forward_kernel<T, 1><<<row_blocks(N), 32 * warps_per_block, 0, s>>>(y, x, w, N, D, eps);
  }
  MT_CHECK_LAUNCH("rmsnorm_forward", "N={} D={}", N, D);
}

template <typename T>
void rmsnorm_backward(T* dx, float* dw, const T* dy, const T* x, const T* w, int64_t N, int64_t D, float eps,
                      cudaStream_t s) {
  MT_ASSERT(N >= 0 && D > 0, "rmsnorm_backward: N {} D {}", N, D);
  if (N == 0) return;
  const char* op = "rmsnorm_backward";
  Scratch<float> rstd(op, N, s);
  constexpr int V = vec16<T>;
  if (vec_ok(V, {D}, {dx, dy, x, w})) {
    rmsnorm_backward_dx_kernel<T, V><<<row_blocks(N), 32 * warps_per_block, 0, s>>>(dx, rstd.get(), dy, x, w, N, D,
                                                                                    eps);
  } else {
    rmsnorm_backward_dx_kernel<T, 1><<<row_blocks(N), 32 * warps_per_block, 0, s>>>(dx, rstd.get(), dy, x, w, N, D,
                                                                                    eps);
  }
  MT_CHECK_LAUNCH(op, "dx N={} D={}", N, D);
  column_sum_accumulate(op, dw, N, D, dw_summand<T>{dy, x, rstd.get(), D}, s);
}

template void rmsnorm_forward<float>(float*, const float*, const float*, int64_t, int64_t, float, cudaStream_t);
template void rmsnorm_forward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, int64_t,
                                             int64_t, float, cudaStream_t);
template void rmsnorm_backward<float>(float*, float*, const float*, const float*, const float*, int64_t, int64_t,
                                      float, cudaStream_t);
template void rmsnorm_backward<__nv_bfloat16>(__nv_bfloat16*, float*, const __nv_bfloat16*, const __nv_bfloat16*,
                                              const __nv_bfloat16*, int64_t, int64_t, float, cudaStream_t);

}  // namespace mt::cuda
