// Gated DeltaNet's gates from the b | a projections: beta = σ(b), g = −exp(A_log)·softplus(a + dt_bias) (torch
// softplus: linear above 20), fp32 outputs; backward d_ba =, d_a_log and d_dt_bias += (fp32). Invariant: the CPU
// reference's formulas; the per-head sums over tokens run in fp64 (as the CPU's: they cancel where decays are strong
// and the gate gradients tiny) over fixed token ranges, then the ranges in order.
#include <algorithm>

#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int threads = 256;

__device__ __forceinline__ float sigmoid(float x) { return 1.f / (1.f + expf(-x)); }
__device__ __forceinline__ float softplus(float x) { return x > 20.f ? x : log1pf(expf(x)); }

template <typename T>
__global__ void gates_forward_kernel(float* g, float* beta, const T* ba, const T* a_log, const T* dt_bias, int64_t T_,
                                     int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < T_ * n; e += stride) {
    const int64_t t = e / n, h = e % n;
    beta[e] = sigmoid(to_f32(ba[t * 2 * n + h]));
    g[e] = -expf(to_f32(a_log[h])) * softplus(to_f32(ba[t * 2 * n + n + h]) + to_f32(dt_bias[h]));
  }
}

template <typename T>
__global__ void gates_backward_kernel(T* d_ba, double* partial, const float* dg, const float* dbeta, const T* ba,
                                      const T* a_log, const T* dt_bias, int64_t T_, int64_t n, int64_t per_part) {
  const int64_t h = threadIdx.x;
  if (h >= n) return;
  const int64_t t0 = static_cast<int64_t>(blockIdx.x) * per_part, t1 = min(T_, t0 + per_part);
  const float A = expf(to_f32(a_log[h])), bias = to_f32(dt_bias[h]);
  double acc_a_log = 0.0, acc_dt = 0.0;
  for (int64_t t = t0; t < t1; ++t) {
    const float b = sigmoid(to_f32(ba[t * 2 * n + h]));
    d_ba[t * 2 * n + h] = from_f32<T>(dbeta[t * n + h] * b * (1.f - b));
    const float x = to_f32(ba[t * 2 * n + n + h]) + bias, d = dg[t * n + h];
    const float dx = -A * (x > 20.f ? 1.f : sigmoid(x)) * d;
    d_ba[t * 2 * n + n + h] = from_f32<T>(dx);
    acc_dt += dx;
    acc_a_log += static_cast<double>(d) * (-A * softplus(x));
  }
  partial[(static_cast<int64_t>(blockIdx.x) * n + h) * 2] = acc_a_log;
  partial[(static_cast<int64_t>(blockIdx.x) * n + h) * 2 + 1] = acc_dt;
}

__global__ void gates_sum_kernel(float* d_a_log, float* d_dt_bias, const double* partial, int64_t parts, int64_t n) {
  const int64_t h = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (h >= n) return;
  double a = 0.0, d = 0.0;
  for (int64_t p = 0; p < parts; ++p) {
    a += partial[(p * n + h) * 2];
    d += partial[(p * n + h) * 2 + 1];
  }
  d_a_log[h] += static_cast<float>(a);
  d_dt_bias[h] += static_cast<float>(d);
}

}  // namespace

template <typename T>
void deltanet_gates_forward(float* g, float* beta, const T* ba, const T* a_log, const T* dt_bias, int64_t T_, int64_t n,
                            cudaStream_t s) {
  MT_ASSERT(T_ >= 0 && n > 0, "deltanet_gates_forward: T={} n={}", T_, n);
  if (T_ == 0) return;
  gates_forward_kernel<T><<<grid_for(T_ * n, threads), threads, 0, s>>>(g, beta, ba, a_log, dt_bias, T_, n);
  MT_CHECK_LAUNCH("deltanet_gates_forward", "T={} n={}", T_, n);
}

template <typename T>
void deltanet_gates_backward(T* d_ba, float* d_a_log, float* d_dt_bias, const float* dg, const float* dbeta,
                             const T* ba, const T* a_log, const T* dt_bias, int64_t T_, int64_t n, cudaStream_t s) {
  MT_ASSERT(T_ >= 0 && n > 0 && n <= 1024, "deltanet_gates_backward: T={} n={}", T_, n);
  if (T_ == 0) return;
  const int64_t parts = std::min<int64_t>(T_, 512), per_part = (T_ + parts - 1) / parts;
  const Scratch<double> partial("deltanet_gates_backward", parts * n * 2, s);
  const int block = static_cast<int>((n + 31) / 32 * 32);
  gates_backward_kernel<T><<<static_cast<unsigned>(parts), block, 0, s>>>(d_ba, partial.get(), dg, dbeta, ba, a_log,
                                                                         dt_bias, T_, n, per_part);
  gates_sum_kernel<<<1, block, 0, s>>>(d_a_log, d_dt_bias, partial.get(), parts, n);
  MT_CHECK_LAUNCH("deltanet_gates_backward", "T={} n={}", T_, n);
}

template void deltanet_gates_forward<float>(float*, float*, const float*, const float*, const float*, int64_t, int64_t,
                                            cudaStream_t);
template void deltanet_gates_forward<__nv_bfloat16>(float*, float*, const __nv_bfloat16*, const __nv_bfloat16*,
                                                    const __nv_bfloat16*, int64_t, int64_t, cudaStream_t);
template void deltanet_gates_backward<float>(float*, float*, float*, const float*, const float*, const float*,
                                             const float*, const float*, int64_t, int64_t, cudaStream_t);
template void deltanet_gates_backward<__nv_bfloat16>(__nv_bfloat16*, float*, float*, const float*, const float*,
                                                     const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*,
                                                     int64_t, int64_t, cudaStream_t);

}  // namespace mt::cuda
