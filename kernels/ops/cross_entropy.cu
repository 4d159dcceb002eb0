// Cross-entropy over rows of fp32 logits [rows, V], rows ld elements apart (ld >= V; dlogits alike):
// row_loss = logsumexp − logit[target] (0 if target = −100), dlogits = scale·row_weight[row]·(softmax − onehot)
// (row_weight null: 1); with a soft-cap c > 0 the logits x are first z = c·tanh(x/c) (Gemma 2's final soft-capping,
// as HF divides, tanh's, multiplies) and dlogits carries the chain factor 1 − tanh²(x/c).
// Invariant: one block per row, fixed-order merges; the columns from V to ld are neither read nor written; dlogits
// may alias logits (each element is read before its own thread writes it; the target logit is read before the
// block's first barrier); the soft-cap is a compile-time switch, so without it the arithmetic is exactly the uncapped
// kernel's. Rows go N columns a load where ld and the pointers allow, the last V mod N columns one at a time.
#include <cfloat>
#include <cmath>

#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int threads = 1024;
constexpr int32_t ignore_index = -100;

// Running (max m, Σ exp(x − m)); m starts at −FLT_MAX so that −inf logits add exactly 0.
struct max_sum {
  float m = -FLT_MAX;
  double s = 0.0;
  __device__ void add(float x) {
    if (x > m) {
      s = s * static_cast<double>(expf(m - x)) + 1.0;
      m = x;
    } else {
      s += static_cast<double>(expf(x - m));
    }
  }
  __device__ void merge(float om, double os) {
    const float nm = fmaxf(m, om);
    s = s * static_cast<double>(expf(m - nm)) + os * static_cast<double>(expf(om - nm));
    m = nm;
  }
};

// tanh(x/c) for the soft-cap c (the logit becomes c·tanh(x/c)).
__device__ __forceinline__ float cap_tanh(float x, float cap) { return tanhf(x / cap); }

template <typename T, int N, bool Cap>
__global__ void __launch_bounds__(threads) cross_entropy_kernel(T* dlogits, float* __restrict__ row_loss,
                                                                const float* logits,
                                                                const int32_t* __restrict__ targets,
                                                                const float* __restrict__ row_weight, int64_t V,
                                                                int64_t ld, float scale, float cap) {
  const int64_t row = blockIdx.x;
  if (row_weight) scale *= row_weight[row];
  const int32_t target = targets[row];
  const float* x = logits + row * ld;
  T* dx = dlogits + row * ld;
  const int64_t vectors_end = V - V % N;  // columns [vectors_end, V) one at a time
  // An out-of-range target (the CPU reference asserts) gives NaN loss and gradient, so the step is seen to fail.
  if (target == ignore_index || target < 0 || target >= V) {
    const float fill = target == ignore_index ? 0.f : __int_as_float(0x7fc00000);
    float row_fill[N];
#pragma unroll
    for (int k = 0; k < N; ++k) row_fill[k] = fill;
    for (int64_t c = static_cast<int64_t>(threadIdx.x) * N; c < vectors_end; c += threads * N)
      store_f32<T, N>(dx + c, row_fill);
    for (int64_t c = vectors_end + threadIdx.x; c < V; c += threads) store_f32<T, 1>(dx + c, {fill});
    if (threadIdx.x == 0) row_loss[row] = fill;
    return;
  }
  __shared__ float x_target;  // read before the first barrier: dlogits may overwrite it afterwards
  if (threadIdx.x == 0) x_target = x[target];
  max_sum acc;
  const auto add = [&](float v) { acc.add(Cap ? cap_tanh(v, cap) * cap : v); };
  for (int64_t c = static_cast<int64_t>(threadIdx.x) * N; c < vectors_end; c += threads * N) {
    float v[N];
    load_f32<float, N>(v, x + c);
#pragma unroll
    for (int k = 0; k < N; ++k) add(v[k]);
  }
  for (int64_t c = vectors_end + threadIdx.x; c < V; c += threads) add(x[c]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float om = __shfl_xor_sync(0xffffffffu, acc.m, o);
    const double os = __shfl_xor_sync(0xffffffffu, acc.s, o);
    acc.merge(om, os);
  }
  __shared__ float warp_m[threads / 32];
  __shared__ double warp_s[threads / 32];
  __shared__ double row_lse;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    warp_m[warp] = acc.m;
    warp_s[warp] = acc.s;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    max_sum total;
    for (int i = 0; i < threads / 32; ++i) total.merge(warp_m[i], warp_s[i]);
    row_lse = static_cast<double>(total.m) + log(total.s);
    const float z_target = Cap ? cap_tanh(x_target, cap) * cap : x_target;
    row_loss[row] = static_cast<float>(row_lse - static_cast<double>(z_target));
  }
  __syncthreads();
  const float lse = static_cast<float>(row_lse);
  const auto grad = [&](float v, int64_t c) {
    if constexpr (Cap) {
      const float t = cap_tanh(v, cap);
      float g = scale * expf(t * cap - lse);
      if (c == target) g -= scale;
      return g * (1.f - t * t);
    } else {
      float g = scale * expf(v - lse);
      if (c == target) g -= scale;
      return g;
    }
  };
  for (int64_t c = static_cast<int64_t>(threadIdx.x) * N; c < vectors_end; c += threads * N) {
    float v[N];
    load_f32<float, N>(v, x + c);
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = grad(v[k], c + k);
    store_f32<T, N>(dx + c, v);
  }
  for (int64_t c = vectors_end + threadIdx.x; c < V; c += threads) {
    store_f32<T, 1>(dx + c, {grad(x[c], c)});
  }
}

template <typename T, bool Cap>
void launch(T* dlogits, float* row_loss, const float* logits, const int32_t* targets, const float* row_weight,
            int64_t rows, int64_t V, int64_t ld, float scale, float softcap, cudaStream_t s) {
  constexpr int N = 4;
  if (ld % N == 0 && is_aligned(logits, 16) && is_aligned(dlogits, N * sizeof(T))) {
    cross_entropy_kernel<T, N, Cap><<<static_cast<unsigned>(rows), threads, 0, s>>>(dlogits, row_loss, logits,
                                                                                   targets, row_weight, V, ld, scale,
                                                                                   softcap);
  } else {
    cross_entropy_kernel<T, 1, Cap><<<static_cast<unsigned>(rows), threads, 0, s>>>(dlogits, row_loss, logits,
                                                                                   targets, row_weight, V, ld, scale,
                                                                                   softcap);
  }
}

}  // namespace

template <typename T>
void cross_entropy(T* dlogits, float* row_loss, const float* logits, const int32_t* targets, const float* row_weight,
                   int64_t rows, int64_t V, int64_t ld, float scale, float softcap, cudaStream_t s) {
  MT_ASSERT(rows >= 0 && V > 0 && ld >= V, "cross_entropy: rows {} V {} ld {}", rows, V, ld);
  MT_ASSERT(rows <= 0x7fffffff, "cross_entropy: rows {} exceed the grid", rows);
  MT_ASSERT(softcap >= 0.f && std::isfinite(softcap), "cross_entropy: softcap {} (0 = none)", softcap);
  if (rows == 0) return;
  if (softcap > 0.f) {
    launch<T, true>(dlogits, row_loss, logits, targets, row_weight, rows, V, ld, scale, softcap, s);
  } else {
    launch<T, false>(dlogits, row_loss, logits, targets, row_weight, rows, V, ld, scale, softcap, s);
  }
  MT_CHECK_LAUNCH("cross_entropy", "rows={} V={} ld={} softcap={}", rows, V, ld, softcap);
}

template void cross_entropy<float>(float*, float*, const float*, const int32_t*, const float*, int64_t, int64_t,
                                   int64_t, float, float, cudaStream_t);
template void cross_entropy<__nv_bfloat16>(__nv_bfloat16*, float*, const float*, const int32_t*, const float*, int64_t,
                                           int64_t, int64_t, float, float, cudaStream_t);

}  // namespace mt::cuda
