// Depthwise causal conv1d + SiLU over tokens (Gated DeltaNet's short convolution): y[t, c] = silu(Σ_j w[c, j]·
// x[t − K + 1 + j, c]), taps before the token's sequence start or in another packed segment reading zero; backward
// dx = (gathered per source row), dw += (fp32). Invariant: the CPU reference's semantics; every sum in a fixed
// order (dx gathers its K taps in tap order, dw sums fixed row ranges then the ranges in order): deterministic.
#include <algorithm>

#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int threads = 256;
constexpr int max_kernel = 8;

// Whether tap source `src` is visible to token t (same sequence, same packed segment).
__device__ __forceinline__ bool visible(int64_t src, int64_t t, int64_t seq, const int32_t* segments) {
  return src >= t / seq * seq && (segments == nullptr || segments[src] == segments[t]);
}

template <typename T>
__device__ float pre_activation(const T* x, const T* w, int64_t t, int64_t c, int64_t seq, int64_t C, int64_t K,
                                const int32_t* segments) {
  float acc = 0.f;
  for (int64_t j = 0; j < K; ++j) {
    const int64_t src = t - K + 1 + j;
    if (src >= 0 && visible(src, t, seq, segments)) acc += to_f32(w[c * K + j]) * to_f32(x[src * C + c]);
  }
  return acc;
}

template <typename T>
__global__ void conv_forward_kernel(T* y, const T* x, const T* w, int64_t T_, int64_t seq, int64_t C, int64_t K,
                                    const int32_t* segments) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < T_ * C; e += stride) {
    const int64_t t = e / C, c = e % C;
    const float a = pre_activation(x, w, t, c, seq, C, K, segments);
    y[e] = from_f32<T>(a / (1.f + expf(-a)));
  }
}

// da = dy·silu'(a) in fp32.
template <typename T>
__global__ void conv_da_kernel(float* da, const T* dy, const T* x, const T* w, int64_t T_, int64_t seq, int64_t C,
                               int64_t K, const int32_t* segments) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < T_ * C; e += stride) {
    const int64_t t = e / C, c = e % C;
    const float a = pre_activation(x, w, t, c, seq, C, K, segments);
    const float s = 1.f / (1.f + expf(-a));
    da[e] = to_f32(dy[e]) * s * (1.f + a * (1.f - s));
  }
}

// dx[src, c] = Σ_j w[c, j]·da[src + K − 1 − j, c] over the tokens that see src.
template <typename T>
__global__ void conv_dx_kernel(T* dx, const float* da, const T* w, int64_t T_, int64_t seq, int64_t C, int64_t K,
                               const int32_t* segments) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < T_ * C; e += stride) {
    const int64_t src = e / C, c = e % C;
    float acc = 0.f;
    for (int64_t j = 0; j < K; ++j) {
      const int64_t t = src + K - 1 - j;
      if (t < T_ && visible(src, t, seq, segments)) acc += to_f32(w[c * K + j]) * da[t * C + c];
    }
    dx[e] = from_f32<T>(acc);
  }
}

// dw partials: part p sums tokens [p·per_part, (p+1)·per_part) for channel c, all taps.
template <typename T>
__global__ void conv_dw_partial_kernel(float* partial, const float* da, const T* x, int64_t T_, int64_t seq,
                                       int64_t C, int64_t K, const int32_t* segments, int64_t per_part) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * per_part, t1 = min(T_, t0 + per_part);
  float acc[max_kernel] = {};
  for (int64_t t = t0; t < t1; ++t) {
    const float d = da[t * C + c];
    for (int64_t j = 0; j < K; ++j) {
      const int64_t src = t - K + 1 + j;
      if (src >= 0 && visible(src, t, seq, segments)) acc[j] += d * to_f32(x[src * C + c]);
    }
  }
  for (int64_t j = 0; j < K; ++j) partial[(static_cast<int64_t>(blockIdx.y) * C + c) * K + j] = acc[j];
}

__global__ void conv_dw_sum_kernel(float* dw, const float* partial, int64_t parts, int64_t CK) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= CK) return;
  float acc = 0.f;
  for (int64_t p = 0; p < parts; ++p) acc += partial[p * CK + e];
  dw[e] += acc;
}

}  // namespace

template <typename T>
void causal_conv1d_forward(T* y, const T* x, const T* w, int64_t batch, int64_t seq, int64_t C, int64_t K,
                           const int32_t* segments, cudaStream_t s) {
  MT_ASSERT(batch >= 0 && seq > 0 && C > 0 && K >= 1 && K <= max_kernel, "causal_conv1d_forward: batch={} seq={} C={} K={}",
            batch, seq, C, K);
  const int64_t T_ = batch * seq;
  if (T_ == 0) return;
  conv_forward_kernel<T><<<grid_for(T_ * C, threads), threads, 0, s>>>(y, x, w, T_, seq, C, K, segments);
  MT_CHECK_LAUNCH("causal_conv1d_forward", "T={} C={} K={}", T_, C, K);
}

template <typename T>
void causal_conv1d_backward(T* dx, float* dw, const T* dy, const T* x, const T* w, int64_t batch, int64_t seq, int64_t C,
                            int64_t K, const int32_t* segments, cudaStream_t s) {
  MT_ASSERT(batch >= 0 && seq > 0 && C > 0 && K >= 1 && K <= max_kernel,
            "causal_conv1d_backward: batch={} seq={} C={} K={}", batch, seq, C, K);
  const int64_t T_ = batch * seq;
  if (T_ == 0) return;
  const Scratch<float> da("causal_conv1d_backward", T_ * C, s);
  conv_da_kernel<T><<<grid_for(T_ * C, threads), threads, 0, s>>>(da.get(), dy, x, w, T_, seq, C, K, segments);
  conv_dx_kernel<T><<<grid_for(T_ * C, threads), threads, 0, s>>>(dx, da.get(), w, T_, seq, C, K, segments);
  const int64_t parts = std::min<int64_t>(T_, 256), per_part = (T_ + parts - 1) / parts;
  const Scratch<float> partial("causal_conv1d_backward", parts * C * K, s);
  const dim3 grid(static_cast<unsigned>((C + 127) / 128), static_cast<unsigned>(parts));
  conv_dw_partial_kernel<T><<<grid, 128, 0, s>>>(partial.get(), da.get(), x, T_, seq, C, K, segments, per_part);
  conv_dw_sum_kernel<<<static_cast<unsigned>((C * K + 255) / 256), 256, 0, s>>>(dw, partial.get(), parts, C * K);
  MT_CHECK_LAUNCH("causal_conv1d_backward", "T={} C={} K={}", T_, C, K);
}

template void causal_conv1d_forward<float>(float*, const float*, const float*, int64_t, int64_t, int64_t, int64_t,
                                           const int32_t*, cudaStream_t);
template void causal_conv1d_forward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, int64_t,
                                                   int64_t, int64_t, int64_t, const int32_t*, cudaStream_t);
template void causal_conv1d_backward<float>(float*, float*, const float*, const float*, const float*, int64_t, int64_t,
                                            int64_t, int64_t, const int32_t*, cudaStream_t);
template void causal_conv1d_backward<__nv_bfloat16>(__nv_bfloat16*, float*, const __nv_bfloat16*,
                                                    const __nv_bfloat16*, const __nv_bfloat16*, int64_t, int64_t,
                                                    int64_t, int64_t, const int32_t*, cudaStream_t);

}  // namespace mt::cuda
