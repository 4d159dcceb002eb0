// RMSNorm gated by silu(z) (Qwen3.5's RMSNormGated): y = w·x̂·silu(z) over rows of D, x̂ = x·rsqrt(mean(x²) + eps);
// backward dx, dz =, dw += (fp32). Invariant: one warp per row, sums in a fixed lane order; dw by per-column partials over
// fixed row ranges, then summed in part order (deterministic, no atomics); math in fp32, one rounding to T per output.
#include <algorithm>

#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int warps_per_block = 8;

__device__ __forceinline__ float sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

template <typename T>
__device__ float row_rstd(const T* x, int64_t D, float eps) {
  float ss = 0.f;
  for (int64_t d = threadIdx.x % 32; d < D; d += 32) {
    const float v = to_f32(x[d]);
    ss += v * v;
  }
  return rsqrtf(warp_sum(ss) / static_cast<float>(D) + eps);
}

template <typename T>
__global__ void gated_rmsnorm_forward_kernel(T* y, const T* x, const T* z, const T* w, int64_t N, int64_t D,
                                             float eps) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * warps_per_block + threadIdx.x / 32;
  if (row >= N) return;
  const T* xr = x + row * D;
  const T* zr = z + row * D;
  const float r = row_rstd(xr, D, eps);
  for (int64_t d = threadIdx.x % 32; d < D; d += 32) {
    const float zv = to_f32(zr[d]);
    y[row * D + d] = from_f32<T>(to_f32(w[d]) * (to_f32(xr[d]) * r) * (zv * sigmoid(zv)));
  }
}

template <typename T>
__global__ void gated_rmsnorm_backward_kernel(T* dx, T* dz, float* rstd, const T* dy, const T* x, const T* z,
                                              const T* w, int64_t N, int64_t D, float eps) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * warps_per_block + threadIdx.x / 32;
  if (row >= N) return;
  const T *xr = x + row * D, *zr = z + row * D, *dyr = dy + row * D;
  const float r = row_rstd(xr, D, eps);
  float proj = 0.f;
  for (int64_t d = threadIdx.x % 32; d < D; d += 32) {
    const float zv = to_f32(zr[d]);
    proj += to_f32(w[d]) * to_f32(dyr[d]) * zv * sigmoid(zv) * to_f32(xr[d]);
  }
  const float c = warp_sum(proj) * r * r * r / static_cast<float>(D);
  for (int64_t d = threadIdx.x % 32; d < D; d += 32) {
    const float zv = to_f32(zr[d]), s = sigmoid(zv), wv = to_f32(w[d]), dyv = to_f32(dyr[d]), xv = to_f32(xr[d]);
    dz[row * D + d] = from_f32<T>(dyv * wv * (xv * r) * s * (1.f + zv * (1.f - s)));
    dx[row * D + d] = from_f32<T>(r * (wv * dyv * zv * s) - xv * c);
  }
  if (threadIdx.x % 32 == 0) rstd[row] = r;
}

// dw partials: block (column block, part p) sums rows [p·rows_per_part, (p+1)·rows_per_part) in row order.
template <typename T>
__global__ void gated_rmsnorm_dw_partial_kernel(float* partial, const float* rstd, const T* dy, const T* x, const T* z,
                                                int64_t N, int64_t D, int64_t rows_per_part) {
  const int64_t d = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= D) return;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * rows_per_part, n1 = min(N, n0 + rows_per_part);
  float acc = 0.f;
  for (int64_t n = n0; n < n1; ++n) {
    const float zv = to_f32(z[n * D + d]);
    acc += to_f32(dy[n * D + d]) * (to_f32(x[n * D + d]) * rstd[n]) * (zv * sigmoid(zv));
  }
  partial[static_cast<int64_t>(blockIdx.y) * D + d] = acc;
}

// dw[d] += Σ_p partial[p, d], parts in order.
__global__ void gated_rmsnorm_dw_sum_kernel(float* dw, const float* partial, int64_t parts, int64_t D) {
  const int64_t d = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= D) return;
  float acc = 0.f;
  for (int64_t p = 0; p < parts; ++p) acc += partial[p * D + d];
  dw[d] += acc;
}

}  // namespace

template <typename T>
void gated_rmsnorm_forward(T* y, const T* x, const T* z, const T* w, int64_t N, int64_t D, float eps, cudaStream_t s) {
  MT_ASSERT(N >= 0 && D > 0, "gated_rmsnorm_forward: N={} D={}", N, D);
  if (N == 0) return;
  const auto blocks = static_cast<unsigned>((N + warps_per_block - 1) / warps_per_block);
  gated_rmsnorm_forward_kernel<T><<<blocks, warps_per_block * 32, 0, s>>>(y, x, z, w, N, D, eps);
  MT_CHECK_LAUNCH("gated_rmsnorm_forward", "N={} D={}", N, D);
}

template <typename T>
void gated_rmsnorm_backward(T* dx, T* dz, float* dw, const T* dy, const T* x, const T* z, const T* w, int64_t N,
                            int64_t D, float eps, cudaStream_t s) {
  MT_ASSERT(N >= 0 && D > 0, "gated_rmsnorm_backward: N={} D={}", N, D);
  if (N == 0) return;
  const Scratch<float> rstd("gated_rmsnorm_backward", N, s);
  const auto blocks = static_cast<unsigned>((N + warps_per_block - 1) / warps_per_block);
  gated_rmsnorm_backward_kernel<T><<<blocks, warps_per_block * 32, 0, s>>>(dx, dz, rstd.get(), dy, x, z, w, N, D, eps);
  const int64_t parts = std::min<int64_t>(N, 512), rows_per_part = (N + parts - 1) / parts;
  const Scratch<float> partial("gated_rmsnorm_backward", parts * D, s);
  const dim3 grid(static_cast<unsigned>((D + 127) / 128), static_cast<unsigned>(parts));
  gated_rmsnorm_dw_partial_kernel<T><<<grid, 128, 0, s>>>(partial.get(), rstd.get(), dy, x, z, N, D, rows_per_part);
  gated_rmsnorm_dw_sum_kernel<<<static_cast<unsigned>((D + 127) / 128), 128, 0, s>>>(dw, partial.get(), parts, D);
  MT_CHECK_LAUNCH("gated_rmsnorm_backward", "N={} D={}", N, D);
}

template void gated_rmsnorm_forward<float>(float*, const float*, const float*, const float*, int64_t, int64_t, float,
                                           cudaStream_t);
template void gated_rmsnorm_forward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*,
                                                   const __nv_bfloat16*, int64_t, int64_t, float, cudaStream_t);
template void gated_rmsnorm_backward<float>(float*, float*, float*, const float*, const float*, const float*,
                                            const float*, int64_t, int64_t, float, cudaStream_t);
template void gated_rmsnorm_backward<__nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, float*, const __nv_bfloat16*,
                                                    const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*,
                                                    int64_t, int64_t, float, cudaStream_t);

}  // namespace mt::cuda
