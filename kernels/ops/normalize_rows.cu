// Row L2 normalisation y = x / max(‖x‖₂, 1e-12) (torch.nn.functional.normalize over the last dim; Baichuan 2's
// normalised LM head) and its backward dx += ∂(Σ dy·y)/∂x, dy and dx fp32.
// Invariant: one block per row; Σ x² (and Σ x·dy) in fp64 per thread, then a fixed-order block reduction (every thread
// reads the warp partials in warp order), so results are deterministic; y = x / n as torch divides (no reciprocal);
// the backward recomputes n and x/n in fp32 from x as stored (no rounding of y to T).
#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int threads = 256, block_warps = threads / 32;
constexpr float norm_eps = 1e-12f;  // F.normalize's default eps, the clamp on ‖x‖

// ‖x‖ clamped to eps, from Σ x² (fp64): sqrt in fp64, one rounding to fp32.
__device__ __forceinline__ float clamped_norm(double sum_sq) {
  return fmaxf(static_cast<float>(sqrt(sum_sq)), norm_eps);
}

template <typename T, int N>
__global__ void __launch_bounds__(threads) normalize_rows_forward_kernel(T* __restrict__ y, const T* __restrict__ x,
                                                                         int64_t D) {
  __shared__ double red[block_warps];
  const T* xr = x + static_cast<int64_t>(blockIdx.x) * D;
  T* yr = y + static_cast<int64_t>(blockIdx.x) * D;
  double ss = 0.0;
  for (int64_t d = static_cast<int64_t>(threadIdx.x) * N; d < D; d += threads * N) {
    float xv[N];
    load_f32<T, N>(xv, xr + d);
#pragma unroll
    for (int k = 0; k < N; ++k) ss += static_cast<double>(xv[k]) * xv[k];
  }
  const float n = clamped_norm(block_sum_all<block_warps>(ss, red));
  for (int64_t d = static_cast<int64_t>(threadIdx.x) * N; d < D; d += threads * N) {
    float xv[N];
    load_f32<T, N>(xv, xr + d);
#pragma unroll
    for (int k = 0; k < N; ++k) xv[k] = xv[k] / n;
    store_f32<T, N>(yr + d, xv);
  }
}

// With n = ‖x‖ and y = x/n: dx += (dy − y·(y·dy)) / n where ‖x‖ >= eps; where the clamp holds (‖x‖ < eps, the
// norm is the constant eps) dx += dy / eps, as autograd differentiates clamp_min.
template <typename T, int N>
__global__ void __launch_bounds__(threads) normalize_rows_backward_kernel(float* __restrict__ dx,
                                                                          const float* __restrict__ dy,
                                                                          const T* __restrict__ x, int64_t D) {
  __shared__ double red[block_warps];
  const int64_t off = static_cast<int64_t>(blockIdx.x) * D;
  const T* xr = x + off;
  const float* dyr = dy + off;
  float* dxr = dx + off;
  double ss = 0.0, xdy = 0.0;
  for (int64_t d = static_cast<int64_t>(threadIdx.x) * N; d < D; d += threads * N) {
    float xv[N], dyv[N];
    load_f32<T, N>(xv, xr + d);
    load_f32<float, N>(dyv, dyr + d);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      ss += static_cast<double>(xv[k]) * xv[k];
      xdy += static_cast<double>(xv[k]) * dyv[k];
    }
  }
  const double sum_sq = block_sum_all<block_warps>(ss, red);
  const double sum_xdy = block_sum_all<block_warps>(xdy, red);
  const double norm = sqrt(sum_sq);
  const bool clamped = !(static_cast<float>(norm) >= norm_eps);
  const float n = clamped_norm(sum_sq);
  const float ydy = clamped ? 0.f : static_cast<float>(sum_xdy / norm);  // y·dy = (x·dy)/n
  for (int64_t d = static_cast<int64_t>(threadIdx.x) * N; d < D; d += threads * N) {
    float xv[N], dyv[N], dxv[N];
    load_f32<T, N>(xv, xr + d);
    load_f32<float, N>(dyv, dyr + d);
    load_f32<float, N>(dxv, dxr + d);
#pragma unroll
    for (int k = 0; k < N; ++k) dxv[k] += (dyv[k] - (xv[k] / n) * ydy) / n;
    store_f32<float, N>(dxr + d, dxv);
  }
}

void check(const char* op, int64_t N, int64_t D) {
  MT_ASSERT(N >= 0 && D > 0, "{}: N {} D {}", op, N, D);
  MT_ASSERT(N <= 0x7fffffff, "{}: N {} rows exceed the grid", op, N);
}

}  // namespace

template <typename T>
void normalize_rows_forward(T* y, const T* x, int64_t N, int64_t D, cudaStream_t s) {
  check("normalize_rows_forward", N, D);
  if (N == 0) return;
  constexpr int V = vec16<T>;
  if (vec_ok(V, {D}, {y, x})) {
    normalize_rows_forward_kernel<T, V><<<static_cast<unsigned>(N), threads, 0, s>>>(y, x, D);
  } else {
    normalize_rows_forward_kernel<T, 1><<<static_cast<unsigned>(N), threads, 0, s>>>(y, x, D);
  }
  MT_CHECK_LAUNCH("normalize_rows_forward", "N={} D={}", N, D);
}

template <typename T>
void normalize_rows_backward(float* dx, const float* dy, const T* x, int64_t N, int64_t D, cudaStream_t s) {
  check("normalize_rows_backward", N, D);
  if (N == 0) return;
  constexpr int V = vec16<T>;  // 8 bf16 (one 16-byte access) or 4 floats; the fp32 dy, dx take V/4 accesses
  if (vec_ok(V, {D}, {dx, dy, x})) {
    normalize_rows_backward_kernel<T, V><<<static_cast<unsigned>(N), threads, 0, s>>>(dx, dy, x, D);
  } else {
    normalize_rows_backward_kernel<T, 1><<<static_cast<unsigned>(N), threads, 0, s>>>(dx, dy, x, D);
  }
  MT_CHECK_LAUNCH("normalize_rows_backward", "N={} D={}", N, D);
}

template void normalize_rows_forward<float>(float*, const float*, int64_t, int64_t, cudaStream_t);
template void normalize_rows_forward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, int64_t, int64_t,
                                                    cudaStream_t);
template void normalize_rows_backward<float>(float*, const float*, const float*, int64_t, int64_t, cudaStream_t);
template void normalize_rows_backward<__nv_bfloat16>(float*, const float*, const __nv_bfloat16*, int64_t, int64_t,
                                                     cudaStream_t);

}  // namespace mt::cuda
