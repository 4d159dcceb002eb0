// Gated MLP activations y = act(g)·u and their backward dg, du (overwritten): SwiGLU with silu(g) = g / (1 + exp(−g)),
// GeGLU with torch's gelu(approximate='tanh') = 0.5·g·(1 + tanh(√(2/π)·(g + 0.044715·g³))).
// Invariant: the CPU reference's formulas in fp32 (expf, tanhf, IEEE division), silu exactly as the SwiGLU kernel
// always computed it, gelu_tanh as torch's CUDA kernel orders it; one rounding to T per output; the activation is a
// compile-time switch; 16-byte accesses when every pointer is 16-byte aligned, scalar otherwise; grid-stride, any n; the
// backward's y (where given) is the forward's expression, act_forward(g)·u, so the forward's bits. Without u (null: a
// non-gated MLP's activation) u reads as 1 and du is not written: the same expressions, bitwise act(g) and dy·act'(g).
// y and dy are [rows, cols]; g, u, dg and du rows lie ld apart (ld = 2·cols: one [g | u] buffer); vectors of N need N
// to divide cols and ld (rows × cols where ld = cols), so that a vector never straddles a row's end.
#include <cmath>
#include <type_traits>

#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int threads = 256;

// torch's constants for the tanh approximation (opmath fp32): kBeta = √2·(2/√π)·0.5 = √(2/π), kKappa = 0.044715.
constexpr float gelu_beta = static_cast<float>(M_SQRT2 * M_2_SQRTPI * 0.5);
constexpr float gelu_kappa = 0.044715f;

// act(g) in fp32.
template <Activation A>
__device__ __forceinline__ float act_forward(float g) {
  if constexpr (A == Activation::silu) {
    return g / (1.f + expf(-g));
  } else {
    const float inner = gelu_beta * (g + gelu_kappa * (g * g * g));
    return 0.5f * g * (1.f + tanhf(inner));
  }
}

// act'(g) and act(g) in fp32 (silu exactly as before: the sigmoid for the derivative, g / (1 + e) for the value).
template <Activation A>
__device__ __forceinline__ void act_backward(float g, float& derivative, float& value) {
  if constexpr (A == Activation::silu) {
    const float e = expf(-g);
    const float sig = 1.f / (1.f + e);
    derivative = sig * (1.f + g * (1.f - sig));
    value = g / (1.f + e);
  } else {
    const float g2 = g * g;
    const float inner = gelu_beta * (g + gelu_kappa * (g2 * g));
    const float th = tanhf(inner);
    const float left = 0.5f * g, right = 1.f + th;
    const float tanh_derivative = 1.f - th * th;
    const float inner_derivative = gelu_beta * (1.f + 3.f * gelu_kappa * g2);
    derivative = 0.5f * right + left * tanh_derivative * inner_derivative;
    value = left * right;
  }
}

// The N gating factors at j: u's, or 1 without u.
template <typename T, int N>
__device__ __forceinline__ void load_up(float (&uv)[N], const T* u, int64_t j) {
  if (u) {
    load_f32<T, N>(uv, u + j);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) uv[i] = 1.f;
  }
}

template <typename T, int N, Activation A>
__global__ void glu_forward_kernel(T* __restrict__ y, const T* __restrict__ g, const T* __restrict__ u, int64_t n,
                                   int64_t cols, int64_t ld) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v * N < n; v += stride) {
    const int64_t j = strided_at(v * N, cols, ld);
    float gv[N], uv[N], yv[N];
    load_f32<T, N>(gv, g + j);
    load_up<T, N>(uv, u, j);
#pragma unroll
    for (int i = 0; i < N; ++i) yv[i] = act_forward<A>(gv[i]) * uv[i];
    store_f32<T, N>(y + v * N, yv);
  }
}

template <typename T, int N, Activation A>
__global__ void glu_backward_kernel(T* __restrict__ dg, T* __restrict__ du, T* __restrict__ y,
                                    const T* __restrict__ dy, const T* __restrict__ g, const T* __restrict__ u,
                                    int64_t n, int64_t cols, int64_t ld) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v * N < n; v += stride) {
    const int64_t j = strided_at(v * N, cols, ld);
    float dyv[N], gv[N], uv[N], dgv[N], duv[N];
    load_f32<T, N>(dyv, dy + v * N);
    load_f32<T, N>(gv, g + j);
    load_up<T, N>(uv, u, j);
#pragma unroll
    for (int i = 0; i < N; ++i) {
      float derivative, value;
      act_backward<A>(gv[i], derivative, value);
      dgv[i] = dyv[i] * uv[i] * derivative;
      duv[i] = dyv[i] * value;
    }
    store_f32<T, N>(dg + j, dgv);
    if (du) store_f32<T, N>(du + j, duv);
    if (y) {
      float yv[N];
#pragma unroll
      for (int i = 0; i < N; ++i) yv[i] = act_forward<A>(gv[i]) * uv[i];
      store_f32<T, N>(y + v * N, yv);
    }
  }
}

const char* act_name(Activation act) { return act == Activation::silu ? "silu" : "gelu_tanh"; }

// Calls f(std::integral_constant<Activation, act>{}).
template <typename F>
void with_activation(const char* op, Activation act, F&& f) {
  switch (act) {
    case Activation::silu: f(std::integral_constant<Activation, Activation::silu>{}); return;
    case Activation::gelu_tanh: f(std::integral_constant<Activation, Activation::gelu_tanh>{}); return;
  }
  MT_ASSERT(false, "{}: unknown activation {}", op, static_cast<int>(act));
}

}  // namespace

template <typename T>
void glu_forward(T* y, const T* g, const T* u, int64_t rows, int64_t cols, int64_t ld, Activation act,
                 cudaStream_t s) {
  MT_ASSERT(rows >= 0 && cols >= 0 && ld >= cols, "glu_forward: rows {} cols {} ld {}", rows, cols, ld);
  const int64_t n = rows * cols;
  if (n == 0) return;
  constexpr int N = vec16<T>;
  const bool vec = vec_ok(N, {ld == cols ? n : cols, ld == cols ? n : ld}, {y, g, u ? u : g});
  with_activation("glu_forward", act, [&](auto a) {
    constexpr Activation A = decltype(a)::value;
    if (vec) {
      glu_forward_kernel<T, N, A><<<grid_for(n / N, threads), threads, 0, s>>>(y, g, u, n, cols, ld);
    } else {
      glu_forward_kernel<T, 1, A><<<grid_for(n, threads), threads, 0, s>>>(y, g, u, n, cols, ld);
    }
  });
  MT_CHECK_LAUNCH("glu_forward", "rows={} cols={} ld={} act={} gated {}", rows, cols, ld, act_name(act),
                  u != nullptr);
}

template <typename T>
void glu_backward(T* dg, T* du, T* y, const T* dy, const T* g, const T* u, int64_t rows, int64_t cols, int64_t ld,
                  Activation act, cudaStream_t s) {
  MT_ASSERT(rows >= 0 && cols >= 0 && ld >= cols, "glu_backward: rows {} cols {} ld {}", rows, cols, ld);
  const int64_t n = rows * cols;
  if (n == 0) return;
  constexpr int N = vec16<T>;
  MT_ASSERT((u == nullptr) == (du == nullptr), "glu_backward: u and du must both be given or both null");
  const bool vec = vec_ok(N, {ld == cols ? n : cols, ld == cols ? n : ld},
                          {dg, du ? du : dg, y ? y : dg, dy, g, u ? u : g});
  with_activation("glu_backward", act, [&](auto a) {
    constexpr Activation A = decltype(a)::value;
    if (vec) {
      glu_backward_kernel<T, N, A><<<grid_for(n / N, threads), threads, 0, s>>>(dg, du, y, dy, g, u, n, cols, ld);
    } else {
      glu_backward_kernel<T, 1, A><<<grid_for(n, threads), threads, 0, s>>>(dg, du, y, dy, g, u, n, cols, ld);
    }
  });
  MT_CHECK_LAUNCH("glu_backward", "rows={} cols={} ld={} act={} with y {} gated {}", rows, cols, ld, act_name(act),
                  y != nullptr, u != nullptr);
}

template void glu_forward<float>(float*, const float*, const float*, int64_t, int64_t, int64_t, Activation,
                                 cudaStream_t);
template void glu_forward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, int64_t, int64_t,
                                         int64_t, Activation, cudaStream_t);
template void glu_backward<float>(float*, float*, float*, const float*, const float*, const float*, int64_t, int64_t,
                                  int64_t, Activation, cudaStream_t);
template void glu_backward<__nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*, const __nv_bfloat16*,
                                          const __nv_bfloat16*, const __nv_bfloat16*, int64_t, int64_t, int64_t,
                                          Activation, cudaStream_t);

}  // namespace mt::cuda
