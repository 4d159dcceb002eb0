// HF RMSNorm over rows of D: y = T(x·rstd)·w with rstd = 1/sqrt(mean(x²) + eps), or with a weight offset
// y = x·rstd·(w + offset) (Gemma's (1 + w)); backward dx = (plus a residual where given: the residual add folded into
// the pass that writes dx), dw += (fp32).
// Invariant: one warp per row, mean(x²) and the backward projection summed in fp64 as the CPU reference does; without
// an offset the normalised value rounds to T before the weight multiply (HF LlamaRMSNorm's order; a no-op for fp32),
// with one the product stays fp32 and rounds once (HF GemmaRMSNorm's order); dw sums in a fixed order. The offset is
// a compile-time switch, so offset 0 runs exactly the arithmetic of the plain kernel; fp32_product takes the offset
// path with offset 0 (OLMo 2/3's (w·x̂).to(dtype): the product in fp32, one rounding). With a residual, dx rounds to T
// and then adds it as `add` does, so the fused pass gives the bits of the two.
#include <cmath>
#include <type_traits>

#include "kernels/ops/column_sum.cuh"
#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int warps_per_block = 8;

__device__ __forceinline__ float rstd_of(double sum_sq, int64_t D, float eps) {
  return 1.f / sqrtf(static_cast<float>(sum_sq / static_cast<double>(D)) + eps);
}

// The weight the row is multiplied by: w, or w + offset (fp32) where the kernel has an offset.
template <bool Offset>
__device__ __forceinline__ float weight_of(float w, float offset) {
  if constexpr (Offset) {
    return w + offset;
  } else {
    return w;
  }
}

template <typename T, int N, bool Offset>
__global__ void rmsnorm_forward_kernel(T* __restrict__ y, const T* __restrict__ x, const T* __restrict__ w,
                                       int64_t rows, int64_t D, float eps, float offset) {
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
    for (int k = 0; k < N; ++k) {
      if constexpr (Offset) {
        xv[k] = (xv[k] * r) * weight_of<Offset>(wv[k], offset);
      } else {
        xv[k] = to_f32(from_f32<T>(xv[k] * r)) * wv[k];
      }
    }
    store_f32<T, N>(yr + d, xv);
  }
}

// dx = r·(w'·dy) − x·r³/D·Σ(w'·dy·x) (+ residual where not null) with w' = w (+ offset); also saves r per row for the
// dw pass. residual may be dx itself (each element is read before it is written, by the same thread).
template <typename T, int N, bool Offset>
__global__ void rmsnorm_backward_dx_kernel(T* dx, float* __restrict__ rstd, const T* __restrict__ dy,
                                           const T* __restrict__ x, const T* __restrict__ w, const T* residual,
                                           int64_t rows, int64_t D, float eps, float offset) {
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
      proj += static_cast<double>(weight_of<Offset>(wv[k], offset) * dyv[k]) * xv[k];
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
    for (int k = 0; k < N; ++k) xv[k] = r * (weight_of<Offset>(wv[k], offset) * dyv[k]) - xv[k] * c;
    if (residual) {
      float rv[N];
      load_f32<T, N>(rv, residual + row * D + d);
#pragma unroll
      for (int k = 0; k < N; ++k) xv[k] = to_f32(from_f32<T>(xv[k])) + rv[k];
    }
    store_f32<T, N>(dxr + d, xv);
  }
  if (lane == 0) rstd[row] = r;
}

// dw summand dy·(x·r), as the CPU reference rounds it (the offset does not enter: ∂(w + offset)/∂w = 1).
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

// Calls f(std::integral_constant<bool, fp32_product>{}): the kernels' Offset path, the weight product in fp32.
template <typename F>
void with_offset(bool fp32_product, F&& f) {
  if (fp32_product) {
    f(std::true_type{});
  } else {
    f(std::false_type{});
  }
}

}  // namespace

template <typename T>
void rmsnorm_forward(T* y, const T* x, const T* w, int64_t N, int64_t D, float eps, float weight_offset,
                     cudaStream_t s, bool fp32_product) {
  MT_ASSERT(N >= 0 && D > 0, "rmsnorm_forward: N {} D {}", N, D);
  MT_ASSERT(std::isfinite(weight_offset), "rmsnorm_forward: weight_offset {}", weight_offset);
  if (N == 0) return;
  constexpr int V = vec16<T>;
  const bool vec = vec_ok(V, {D}, {y, x, w});
  with_offset(weight_offset != 0.f || fp32_product, [&](auto offset) {
    constexpr bool O = decltype(offset)::value;
    if (vec) {
      rmsnorm_forward_kernel<T, V, O><<<row_blocks(N), 32 * warps_per_block, 0, s>>>(y, x, w, N, D, eps, weight_offset);
    } else {
      rmsnorm_forward_kernel<T, 1, O><<<row_blocks(N), 32 * warps_per_block, 0, s>>>(y, x, w, N, D, eps, weight_offset);
    }
  });
  MT_CHECK_LAUNCH("rmsnorm_forward", "N={} D={} weight_offset={} fp32_product {}", N, D, weight_offset, fp32_product);
}

template <typename T>
void rmsnorm_backward(T* dx, float* dw, const T* dy, const T* x, const T* w, const T* residual, int64_t N, int64_t D,
                      float eps, float weight_offset, cudaStream_t s) {
  MT_ASSERT(N >= 0 && D > 0, "rmsnorm_backward: N {} D {}", N, D);
  MT_ASSERT(std::isfinite(weight_offset), "rmsnorm_backward: weight_offset {}", weight_offset);
  if (N == 0) return;
  const char* op = "rmsnorm_backward";
  Scratch<float> rstd(op, N, s);
  constexpr int V = vec16<T>;
  const bool vec = vec_ok(V, {D}, {dx, dy, x, w, residual ? residual : dx});
  with_offset(weight_offset != 0.f, [&](auto offset) {
    constexpr bool O = decltype(offset)::value;
    if (vec) {
      rmsnorm_backward_dx_kernel<T, V, O><<<row_blocks(N), 32 * warps_per_block, 0, s>>>(dx, rstd.get(), dy, x, w,
                                                                                         residual, N, D, eps,
                                                                                         weight_offset);
    } else {
      rmsnorm_backward_dx_kernel<T, 1, O><<<row_blocks(N), 32 * warps_per_block, 0, s>>>(dx, rstd.get(), dy, x, w,
                                                                                         residual, N, D, eps,
                                                                                         weight_offset);
    }
  });
  MT_CHECK_LAUNCH(op, "dx N={} D={} weight_offset={} residual {}", N, D, weight_offset, residual != nullptr);
  column_sum_accumulate(op, dw, N, D, dw_summand<T>{dy, x, rstd.get(), D}, s);
}

template void rmsnorm_forward<float>(float*, const float*, const float*, int64_t, int64_t, float, float,
                                     cudaStream_t, bool);
template void rmsnorm_forward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, int64_t,
                                             int64_t, float, float, cudaStream_t, bool);
template void rmsnorm_backward<float>(float*, float*, const float*, const float*, const float*, const float*, int64_t,
                                      int64_t, float, float, cudaStream_t);
template void rmsnorm_backward<__nv_bfloat16>(__nv_bfloat16*, float*, const __nv_bfloat16*, const __nv_bfloat16*,
                                              const __nv_bfloat16*, const __nv_bfloat16*, int64_t, int64_t, float,
                                              float, cudaStream_t);

}  // namespace mt::cuda
