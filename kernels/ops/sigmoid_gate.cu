// Sigmoid output gate of gated attention (Qwen3.5, Qwen3-Next): y = x·σ(gate); backward dx = dy·σ(gate),
// dgate = dy·x·σ(gate)·(1 − σ(gate)). Invariant: the CPU reference's formulas in fp32, one rounding to T per output;
// elementwise, each element's inputs read before its outputs are written (dx may alias dy); grid-stride, any n.
#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int threads = 256;

__device__ __forceinline__ float sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

template <typename T>
__global__ void sigmoid_gate_forward_kernel(T* y, const T* x, const T* gate, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = from_f32<T>(to_f32(x[i]) * sigmoid(to_f32(gate[i])));
}

template <typename T>
__global__ void sigmoid_gate_backward_kernel(T* dx, T* dgate, const T* dy, const T* x, const T* gate, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float s = sigmoid(to_f32(gate[i])), d = to_f32(dy[i]), xv = to_f32(x[i]);
    dgate[i] = from_f32<T>(d * xv * s * (1.f - s));
    dx[i] = from_f32<T>(d * s);
  }
}

}  // namespace

template <typename T>
void sigmoid_gate_forward(T* y, const T* x, const T* gate, int64_t n, cudaStream_t s) {
  MT_ASSERT(n >= 0, "sigmoid_gate_forward: n = {}", n);
  if (n == 0) return;
  sigmoid_gate_forward_kernel<T><<<grid_for(n, threads), threads, 0, s>>>(y, x, gate, n);
  MT_CHECK_LAUNCH("sigmoid_gate_forward", "n={}", n);
}

template <typename T>
void sigmoid_gate_backward(T* dx, T* dgate, const T* dy, const T* x, const T* gate, int64_t n, cudaStream_t s) {
  MT_ASSERT(n >= 0, "sigmoid_gate_backward: n = {}", n);
  if (n == 0) return;
  sigmoid_gate_backward_kernel<T><<<grid_for(n, threads), threads, 0, s>>>(dx, dgate, dy, x, gate, n);
  MT_CHECK_LAUNCH("sigmoid_gate_backward", "n={}", n);
}

template void sigmoid_gate_forward<float>(float*, const float*, const float*, int64_t, cudaStream_t);
template void sigmoid_gate_forward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, int64_t,
                                                  cudaStream_t);
template void sigmoid_gate_backward<float>(float*, float*, const float*, const float*, const float*, int64_t,
                                           cudaStream_t);
template void sigmoid_gate_backward<__nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, const __nv_bfloat16*,
                                                   const __nv_bfloat16*, const __nv_bfloat16*, int64_t, cudaStream_t);

}  // namespace mt::cuda
