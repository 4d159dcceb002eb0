// Rotary position embedding in place on x[tokens, n_heads, head_dim] over the first rot_dim dims, pair i being
// (x[i], x[i + rot_dim/2]) (HF rotate_half) or, interleaved, (x[2i], x[2i+1]) (GLM); backward applies the transpose
// rotation. Invariant: the CPU reference's formulas in fp32, dims rot_dim.. untouched; positions (device memory) must
// lie in [0, rows of cos/sin), which the caller guarantees; the layout is a compile-time switch, so the rotate_half
// kernel is exactly the one without the interleaved option.
#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int threads = 256;

// x[i] ← x[i]·c − x[i+half]·s', x[i+half] ← x[i+half]·c + x[i]·s' with s' = sign·s; N pairs per work item.
// Interleaved: the same with x[2i], x[2i+1] for x[i], x[i+half] (N pairs = 2N consecutive elements).
template <typename T, int N, bool Interleaved>
__global__ void rope_kernel(T* __restrict__ x, const float* __restrict__ cos, const float* __restrict__ sin,
                            const int32_t* __restrict__ positions, int64_t tokens, int64_t n_heads, int64_t head_dim,
                            int64_t half, float sign) {
  const int64_t hv = half / N;
  const int64_t total = tokens * n_heads * hv;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < total; v += stride) {
    const int64_t row = v / hv, i = (v % hv) * N;  // row = token · n_heads + head
    const int64_t table = static_cast<int64_t>(positions[row / n_heads]) * half + i;
    float c[N], s[N];
    load_f32<float, N>(c, cos + table);
    load_f32<float, N>(s, sin + table);
    if constexpr (Interleaved) {
      // The scalar kernel (N = 1) assumes no alignment: element accesses; else 2N elements in 16-byte accesses.
      constexpr int A = N == 1 ? 1 : 2 * N;
      T* p = x + row * head_dim + 2 * i;
      float ab[2 * N];
#pragma unroll
      for (int j = 0; j < 2 * N; j += A) {
        float part[A];
        load_f32<T, A>(part, p + j);
#pragma unroll
        for (int e = 0; e < A; ++e) ab[j + e] = part[e];
      }
#pragma unroll
      for (int k = 0; k < N; ++k) {
        const float si = sign * s[k], ak = ab[2 * k], bk = ab[2 * k + 1];
        ab[2 * k] = ak * c[k] - bk * si;
        ab[2 * k + 1] = bk * c[k] + ak * si;
      }
#pragma unroll
      for (int j = 0; j < 2 * N; j += A) {
        float part[A];
#pragma unroll
        for (int e = 0; e < A; ++e) part[e] = ab[j + e];
        store_f32<T, A>(p + j, part);
      }
    } else {
      float a[N], b[N];
      T* lo = x + row * head_dim + i;
      load_f32<T, N>(a, lo);
      load_f32<T, N>(b, lo + half);
#pragma unroll
      for (int k = 0; k < N; ++k) {
        const float si = sign * s[k], ak = a[k], bk = b[k];
        a[k] = ak * c[k] - bk * si;
        b[k] = bk * c[k] + ak * si;
      }
      store_f32<T, N>(lo, a);
      store_f32<T, N>(lo + half, b);
    }
  }
}

template <typename T>
void rotate(const char* op, T* x, const float* cos, const float* sin, const int32_t* positions, int64_t tokens,
            int64_t n_heads, int64_t head_dim, int64_t rot_dim, bool interleaved, float sign, cudaStream_t s) {
  MT_ASSERT(tokens >= 0 && n_heads > 0 && head_dim > 0, "{}: tokens {} n_heads {} head_dim {}", op, tokens, n_heads,
            head_dim);
  MT_ASSERT(rot_dim > 0 && rot_dim % 2 == 0 && rot_dim <= head_dim, "{}: rot_dim {} head_dim {}", op, rot_dim,
            head_dim);
  const int64_t half = rot_dim / 2, pairs = tokens * n_heads * half;
  if (pairs == 0) return;
  // Vector path: N pairs per item, every x access 16-byte aligned (head_dim, half multiples of N; for interleaved
  // items start at element 2i with i a multiple of N) and every cos/sin access too (half a multiple of N >= 4).
  constexpr int N = vec16<T>;
  const bool vec = vec_ok(N, {half, head_dim}, {x, cos, sin});
  if (interleaved) {
    if (vec) {
      rope_kernel<T, N, true><<<grid_for(pairs / N, threads), threads, 0, s>>>(x, cos, sin, positions, tokens,
                                                                               n_heads, head_dim, half, sign);
    } else {
      rope_kernel<T, 1, true><<<grid_for(pairs, threads), threads, 0, s>>>(x, cos, sin, positions, tokens, n_heads,
                                                                           head_dim, half, sign);
    }
  } else {
    if (vec) {
      rope_kernel<T, N, false><<<grid_for(pairs / N, threads), threads, 0, s>>>(x, cos, sin, positions, tokens,
                                                                                n_heads, head_dim, half, sign);
    } else {
      rope_kernel<T, 1, false><<<grid_for(pairs, threads), threads, 0, s>>>(x, cos, sin, positions, tokens, n_heads,
                                                                            head_dim, half, sign);
    }
  }
  MT_CHECK_LAUNCH(op, "tokens={} n_heads={} head_dim={} rot_dim={} interleaved={}", tokens, n_heads, head_dim, rot_dim,
                  interleaved);
}

}  // namespace

template <typename T>
void rope_forward(T* x, const float* cos, const float* sin, const int32_t* positions, int64_t tokens, int64_t n_heads,
                  int64_t head_dim, int64_t rot_dim, bool interleaved, cudaStream_t s) {
  rotate("rope_forward", x, cos, sin, positions, tokens, n_heads, head_dim, rot_dim, interleaved, 1.f, s);
}

template <typename T>
void rope_backward(T* dx, const float* cos, const float* sin, const int32_t* positions, int64_t tokens,
                   int64_t n_heads, int64_t head_dim, int64_t rot_dim, bool interleaved, cudaStream_t s) {
  rotate("rope_backward", dx, cos, sin, positions, tokens, n_heads, head_dim, rot_dim, interleaved, -1.f, s);
}

template void rope_forward<float>(float*, const float*, const float*, const int32_t*, int64_t, int64_t, int64_t,
                                  int64_t, bool, cudaStream_t);
template void rope_forward<__nv_bfloat16>(__nv_bfloat16*, const float*, const float*, const int32_t*, int64_t,
                                          int64_t, int64_t, int64_t, bool, cudaStream_t);
template void rope_backward<float>(float*, const float*, const float*, const int32_t*, int64_t, int64_t, int64_t,
                                   int64_t, bool, cudaStream_t);
template void rope_backward<__nv_bfloat16>(__nv_bfloat16*, const float*, const float*, const int32_t*, int64_t,
                                           int64_t, int64_t, int64_t, bool, cudaStream_t);

}  // namespace mt::cuda
