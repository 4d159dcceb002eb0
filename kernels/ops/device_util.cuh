// Device helpers shared by the kernels: fp32 <-> element conversion, 16-byte packs, strided rows, warp sums.
// Invariant: bf16 results round to nearest even (as torch does); every reduction here has a fixed order.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace mt::cuda {

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// N elements of T loaded or stored as one aligned access (N·sizeof(T) bytes).
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

// Elements of T in one 16-byte access.
template <typename T> inline constexpr int vec16 = 16 / static_cast<int>(sizeof(T));

// N consecutive elements as fp32, read / written in accesses of at most 16 bytes (the pointer must be aligned to
// min(N·sizeof(T), 16) bytes).
template <typename T, int N>
__device__ __forceinline__ void load_f32(float (&out)[N], const T* p) {
  constexpr int c = N < vec16<T> ? N : vec16<T>;
  static_assert(N % c == 0);
#pragma unroll
  for (int j = 0; j < N; j += c) {
    const Pack<T, c> pk = *reinterpret_cast<const Pack<T, c>*>(p + j);
#pragma unroll
    for (int i = 0; i < c; ++i) out[j + i] = to_f32(pk.v[i]);
  }
}

template <typename T, int N>
__device__ __forceinline__ void store_f32(T* p, const float (&in)[N]) {
  constexpr int c = N < vec16<T> ? N : vec16<T>;
  static_assert(N % c == 0);
#pragma unroll
  for (int j = 0; j < N; j += c) {
    Pack<T, c> pk;
#pragma unroll
    for (int i = 0; i < c; ++i) pk.v[i] = from_f32<T>(in[j + i]);
    *reinterpret_cast<Pack<T, c>*>(p + j) = pk;
  }
}

// Where element i of a dense [rows, cols] operand sits in one whose rows lie ld ≥ cols apart (the glu ops' gate and
// up in one [gate | up] buffer).
__device__ __forceinline__ int64_t strided_at(int64_t i, int64_t cols, int64_t ld) {
  return ld == cols ? i : i / cols * ld + i % cols;
}

// Butterfly sum over the 32 lanes; every lane gets the same (order-fixed) result.
template <typename A>
__device__ __forceinline__ A warp_sum(A x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Σ over a block of Warps warps of one fp64 value per thread, the same (order-fixed: warp partials read in warp
// order) result in every thread; red holds Warps doubles of shared memory and is free again when this returns.
template <int Warps>
__device__ __forceinline__ double block_sum_all(double v, double* red) {
  v = warp_sum(v);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  double total = 0.0;
#pragma unroll
  for (int w = 0; w < Warps; ++w) total += red[w];
  __syncthreads();
  return total;
}

}  // namespace mt::cuda
