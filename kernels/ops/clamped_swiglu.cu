// GPT-OSS's clamped SwiGLU and its backward (semantics in backend.h): g = min(gate, limit), u = clamp(up, −limit,
// limit), y = (u + 1)·g·σ(alpha·g); dgate, dup = (zero where a clamp holds its input; a bound itself passes).
// Invariant: the CPU reference's formulas in fp32 (expf, IEEE division), one rounding to T per output; grid-stride,
// any n; elementwise, so deterministic. y and dy are [rows, cols]; gate, up, dgate and dup rows lie ld apart (ld =
// 2·cols: one [gate | up] buffer).
#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int threads = 256;

template <typename T>
__global__ void clamped_swiglu_forward_kernel(T* __restrict__ y, const T* __restrict__ gate, const T* __restrict__ up,
                                              int64_t n, int64_t cols, int64_t ld, float alpha, float limit) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t j = strided_at(i, cols, ld);
    const float g = fminf(to_f32(gate[j]), limit), u = fminf(fmaxf(to_f32(up[j]), -limit), limit);
    const float glu = g * (1.f / (1.f + expf(-(g * alpha))));
    y[i] = from_f32<T>((u + 1.f) * glu);
  }
}

template <typename T>
__global__ void clamped_swiglu_backward_kernel(T* __restrict__ dgate, T* __restrict__ dup, const T* __restrict__ dy,
                                               const T* __restrict__ gate, const T* __restrict__ up, int64_t n,
                                               int64_t cols, int64_t ld, float alpha, float limit) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t j = strided_at(i, cols, ld);
    const float gate_in = to_f32(gate[j]), up_in = to_f32(up[j]), d = to_f32(dy[i]);
    const float g = fminf(gate_in, limit), u = fminf(fmaxf(up_in, -limit), limit);
    const float sg = 1.f / (1.f + expf(-(g * alpha)));
    const float glu = g * sg;
    dup[j] = from_f32<T>(up_in >= -limit && up_in <= limit ? d * glu : 0.f);
    const float dglu = d * (u + 1.f);
    dgate[j] = from_f32<T>(gate_in <= limit ? dglu * (sg + g * alpha * sg * (1.f - sg)) : 0.f);
  }
}

}  // namespace

template <typename T>
void clamped_swiglu_forward(T* y, const T* gate, const T* up, int64_t rows, int64_t cols, int64_t ld, float alpha,
                            float limit, cudaStream_t s) {
  MT_ASSERT(rows >= 0 && cols >= 0 && ld >= cols && limit > 0.f,
            "clamped_swiglu_forward: rows {} cols {} ld {} limit = {}", rows, cols, ld, limit);
  const int64_t n = rows * cols;
  if (n == 0) return;
  clamped_swiglu_forward_kernel<T><<<grid_for(n, threads), threads, 0, s>>>(y, gate, up, n, cols, ld, alpha, limit);
  MT_CHECK_LAUNCH("clamped_swiglu_forward", "rows={} cols={} ld={} alpha={} limit={}", rows, cols, ld, alpha, limit);
}

template <typename T>
void clamped_swiglu_backward(T* dgate, T* dup, const T* dy, const T* gate, const T* up, int64_t rows, int64_t cols,
                             int64_t ld, float alpha, float limit, cudaStream_t s) {
  MT_ASSERT(rows >= 0 && cols >= 0 && ld >= cols && limit > 0.f,
            "clamped_swiglu_backward: rows {} cols {} ld {} limit = {}", rows, cols, ld, limit);
  const int64_t n = rows * cols;
  if (n == 0) return;
  clamped_swiglu_backward_kernel<T><<<grid_for(n, threads), threads, 0, s>>>(dgate, dup, dy, gate, up, n, cols, ld,
                                                                             alpha, limit);
  MT_CHECK_LAUNCH("clamped_swiglu_backward", "rows={} cols={} ld={} alpha={} limit={}", rows, cols, ld, alpha, limit);
}

template void clamped_swiglu_forward<float>(float*, const float*, const float*, int64_t, int64_t, int64_t, float, float,
                                            cudaStream_t);
template void clamped_swiglu_forward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, int64_t,
                                                    int64_t, int64_t, float, float, cudaStream_t);
template void clamped_swiglu_backward<float>(float*, float*, const float*, const float*, const float*, int64_t, int64_t,
                                             int64_t, float, float, cudaStream_t);
template void clamped_swiglu_backward<__nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, const __nv_bfloat16*,
                                                     const __nv_bfloat16*, const __nv_bfloat16*, int64_t, int64_t,
                                                     int64_t, float, float, cudaStream_t);

}  // namespace mt::cuda
