// LayerNorm over rows of D (nn.LayerNorm, CohereLayerNorm): y = ((x − mean)·rstd)·w_g + b_g with rstd =
// 1/sqrt(var + eps), var the biased variance, g = row % weight_rows (w, b [weight_rows, D]; b may be null); backward
// dx = rstd·(w·dy − mean(w·dy) − x̂·mean(w·dy·x̂)) (plus a residual where given, which may be dx itself), dw and db +=
// (fp32).
// Invariant: one warp per row; mean, variance (two passes) and the backward's row sums in fp64 as the CPU reference
// sums them; math in fp32, one rounding to T per output; with a residual, dx rounds to T and then adds it as `add`
// does. dw and db sum in a fixed order (column_sum.cuh over the rows as [N / weight_rows, weight_rows·D] columns).
#include "kernels/ops/column_sum.cuh"
#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int warps_per_block = 8;

struct RowStats {
  float mean, rstd;
};

// The row's mean and rstd, both passes over x summed in fp64 across the warp.
template <typename T, int N>
__device__ RowStats row_stats(const T* xr, int64_t D, float eps, int lane) {
  double sum = 0.0;
  for (int64_t d = lane * N; d < D; d += 32 * N) {
    float xv[N];
    load_f32<T, N>(xv, xr + d);
#pragma unroll
    for (int k = 0; k < N; ++k) sum += xv[k];
  }
  const auto mean = static_cast<float>(warp_sum(sum) / static_cast<double>(D));
  double ss = 0.0;
  for (int64_t d = lane * N; d < D; d += 32 * N) {
    float xv[N];
    load_f32<T, N>(xv, xr + d);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const auto c = static_cast<double>(xv[k] - mean);
      ss += c * c;
    }
  }
  return {mean, 1.f / sqrtf(static_cast<float>(warp_sum(ss) / static_cast<double>(D)) + eps)};
}

template <typename T, int N>
__global__ void layernorm_forward_kernel(T* __restrict__ y, const T* __restrict__ x, const T* __restrict__ w,
                                         const T* __restrict__ b, int64_t rows, int64_t D, int64_t weight_rows,
                                         float eps) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * warps_per_block + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const T* xr = x + row * D;
  const int64_t g = (row % weight_rows) * D;
  const RowStats s = row_stats<T, N>(xr, D, eps, lane);
  for (int64_t d = lane * N; d < D; d += 32 * N) {
    float xv[N], wv[N];
    load_f32<T, N>(xv, xr + d);
    load_f32<T, N>(wv, w + g + d);
#pragma unroll
    for (int k = 0; k < N; ++k) xv[k] = ((xv[k] - s.mean) * s.rstd) * wv[k];
    if (b) {
      float bv[N];
      load_f32<T, N>(bv, b + g + d);
#pragma unroll
      for (int k = 0; k < N; ++k) xv[k] += bv[k];
    }
    store_f32<T, N>(y + row * D + d, xv);
  }
}

// dx per row (+ residual where not null; residual may be dx: each element is read before it is written, by the same
// thread); also saves mean and rstd per row for the dw, db pass.
template <typename T, int N>
__global__ void layernorm_backward_dx_kernel(T* dx, RowStats* __restrict__ stats, const T* __restrict__ dy,
                                             const T* __restrict__ x, const T* __restrict__ w, const T* residual,
                                             int64_t rows, int64_t D, int64_t weight_rows, float eps) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * warps_per_block + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const T* xr = x + row * D;
  const T* dyr = dy + row * D;
  const T* wr = w + (row % weight_rows) * D;
  const RowStats s = row_stats<T, N>(xr, D, eps, lane);
  double sum_g = 0.0, sum_gx = 0.0;
  for (int64_t d = lane * N; d < D; d += 32 * N) {
    float xv[N], dyv[N], wv[N];
    load_f32<T, N>(xv, xr + d);
    load_f32<T, N>(dyv, dyr + d);
    load_f32<T, N>(wv, wr + d);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float g = wv[k] * dyv[k];
      sum_g += g;
      sum_gx += static_cast<double>(g) * ((xv[k] - s.mean) * s.rstd);
    }
  }
  const auto mean_g = static_cast<float>(warp_sum(sum_g) / static_cast<double>(D));
  const auto mean_gx = static_cast<float>(warp_sum(sum_gx) / static_cast<double>(D));
  T* dxr = dx + row * D;
  for (int64_t d = lane * N; d < D; d += 32 * N) {
    float xv[N], dyv[N], wv[N];
    load_f32<T, N>(xv, xr + d);
    load_f32<T, N>(dyv, dyr + d);
    load_f32<T, N>(wv, wr + d);
#pragma unroll
    for (int k = 0; k < N; ++k) xv[k] = s.rstd * ((wv[k] * dyv[k] - mean_g) - ((xv[k] - s.mean) * s.rstd) * mean_gx);
    if (residual) {
      float rv[N];
      load_f32<T, N>(rv, residual + row * D + d);
#pragma unroll
      for (int k = 0; k < N; ++k) xv[k] = __fadd_rn(to_f32(from_f32<T>(xv[k])), rv[k]);  // never an FMA with dx
    }
    store_f32<T, N>(dxr + d, xv);
  }
  if (lane == 0) stats[row] = s;
}

// dw summand dy·x̂ and db summand dy at column c of the [N / weight_rows, weight_rows·D] view, as the CPU rounds them.
template <typename T, bool Bias>
struct param_summand {
  const T* dy;
  const T* x;
  const RowStats* stats;
  int64_t D, width;  // width = weight_rows·D
  __device__ double operator()(int64_t r, int64_t c) const {
    const float g = to_f32(dy[r * width + c]);
    if constexpr (Bias) {
      return static_cast<double>(g);
    } else {
      const RowStats s = stats[r * (width / D) + c / D];
      return static_cast<double>(g * ((to_f32(x[r * width + c]) - s.mean) * s.rstd));
    }
  }
};

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>((rows + warps_per_block - 1) / warps_per_block); }

}  // namespace

template <typename T>
void layernorm_forward(T* y, const T* x, const T* w, const T* b, int64_t N, int64_t D, int64_t weight_rows, float eps,
                       cudaStream_t s) {
  MT_ASSERT(N >= 0 && D > 0 && weight_rows > 0 && N % weight_rows == 0, "layernorm_forward: N {} D {} weight_rows {}",
            N, D, weight_rows);
  if (N == 0) return;
  constexpr int V = vec16<T>;
  if (vec_ok(V, {D}, {y, x, w, b ? b : w})) {
    layernorm_forward_kernel<T, V><<<row_blocks(N), 32 * warps_per_block, 0, s>>>(y, x, w, b, N, D, weight_rows, eps);
  } else {
    layernorm_forward_kernel<T, 1><<<row_blocks(N), 32 * warps_per_block, 0, s>>>(y, x, w, b, N, D, weight_rows, eps);
  }
  MT_CHECK_LAUNCH("layernorm_forward", "N={} D={} weight_rows={} bias {}", N, D, weight_rows, b != nullptr);
}

template <typename T>
void layernorm_backward(T* dx, float* dw, float* db, const T* dy, const T* x, const T* w, const T* residual, int64_t N,
                        int64_t D, int64_t weight_rows, float eps, cudaStream_t s) {
  MT_ASSERT(N >= 0 && D > 0 && weight_rows > 0 && N % weight_rows == 0, "layernorm_backward: N {} D {} weight_rows {}",
            N, D, weight_rows);
  if (N == 0) return;
  const char* op = "layernorm_backward";
  Scratch<RowStats> stats(op, N, s);
  constexpr int V = vec16<T>;
  if (vec_ok(V, {D}, {dx, dy, x, w, residual ? residual : dx})) {
    layernorm_backward_dx_kernel<T, V><<<row_blocks(N), 32 * warps_per_block, 0, s>>>(dx, stats.get(), dy, x, w,
                                                                                      residual, N, D, weight_rows, eps);
  } else {
    layernorm_backward_dx_kernel<T, 1><<<row_blocks(N), 32 * warps_per_block, 0, s>>>(dx, stats.get(), dy, x, w,
                                                                                      residual, N, D, weight_rows, eps);
  }
  MT_CHECK_LAUNCH(op, "dx N={} D={} weight_rows={} residual {}", N, D, weight_rows, residual != nullptr);
  const int64_t width = weight_rows * D, rows = N / weight_rows;
  column_sum_accumulate(op, dw, rows, width, param_summand<T, false>{dy, x, stats.get(), D, width}, s);
  if (db) column_sum_accumulate(op, db, rows, width, param_summand<T, true>{dy, x, stats.get(), D, width}, s);
}

template void layernorm_forward<float>(float*, const float*, const float*, const float*, int64_t, int64_t, int64_t,
                                       float, cudaStream_t);
template void layernorm_forward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*,
                                               const __nv_bfloat16*, int64_t, int64_t, int64_t, float, cudaStream_t);
template void layernorm_backward<float>(float*, float*, float*, const float*, const float*, const float*, const float*,
                                        int64_t, int64_t, int64_t, float, cudaStream_t);
template void layernorm_backward<__nv_bfloat16>(__nv_bfloat16*, float*, float*, const __nv_bfloat16*,
                                                const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*,
                                                int64_t, int64_t, int64_t, float, cudaStream_t);

}  // namespace mt::cuda
