// Rotary position embedding in place on x[tokens, n_heads, head_dim] (HF rotate_half) over the first rot_dim dims;
// backward applies the transpose rotation. Invariant: the CPU reference's formulas in fp32, dims rot_dim.. untouched;
// positions (device memory) must lie in [0, rows of cos/sin), which the caller guarantees.
#include "kernels/device_util.cuh"
#include "kernels/kernels.h"
#include "kernels/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int threads = 256;

// x[i] ← x[i]·c − x[i+half]·s', x[i+half] ← x[i+half]·c + x[i]·s' with s' = sign·s; N pairs per work item.
template <typename T, int N>
__global__ void rope_kernel(T* __restrict__ x, const float* __restrict__ cos, const float* __restrict__ sin,
                            const int32_t* __restrict__ positions, int64_t tokens, int64_t n_heads, int64_t head_dim,
                            int64_t half, float sign) {
  const int64_t hv = half / N;
  const int64_t total = tokens * n_heads * hv;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < total; v += stride) {
    const int64_t row = v / hv, i = (v % hv) * N;  // row = token · n_heads + head
    const int64_t table = static_cast<int64_t>(positions[row / n_heads]) * half + i;
    float c[N], s[N], a[N], b[N];
    load_f32<float, N>(c, cos + table);
    load_f32<float, N>(s, sin + table);
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

template <typename T>
void rotate(const char* op, T* x, const float* cos, const float* sin, const int32_t* positions, int64_t tokens,
            int64_t n_heads, int64_t head_dim, int64_t rot_dim, float sign, cudaStream_t s) {
  MT_ASSERT(tokens >= 0 && n_heads > 0 && head_dim > 0, "{}: tokens {} n_heads {} head_dim {}", op, tokens, n_heads,
            head_dim);
  MT_ASSERT(rot_dim > 0 && rot_dim % 2 == 0 && rot_dim <= head_dim, "{}: rot_dim {} head_dim {}", op, rot_dim,
            head_dim);
  const int64_t half = rot_dim / 2, pairs = tokens * n_heads * half;
  if (pairs == 0) return;
  constexpr int N = vec16<T>;
  if (vec_ok(N, {half, head_dim}, {x, cos, sin})) {
    rope_kernel<T, N><<<grid_for(pairs / N, threads), threads, 0, s>>>(x, cos, sin, positions, tokens, n_heads,
                                                                       head_dim, half, sign);
  } else {
    rope_kernel<T, 1><<<grid_for(pairs, threads), threads, 0, s>>>(x, cos, sin, positions, tokens, n_heads, head_dim,
                                                                   half, sign);
  }
  MT_CHECK_LAUNCH(op, "tokens={} n_heads={} head_dim={} rot_dim={}", tokens, n_heads, head_dim, rot_dim);
}

}  // namespace

template <typename T>
void rope_forward(T* x, const float* cos, const float* sin, const int32_t* positions, int64_t tokens, int64_t n_heads,
                  int64_t head_dim, int64_t rot_dim, cudaStream_t s) {
  rotate("rope_forward", x, cos, sin, positions, tokens, n_heads, head_dim, rot_dim, 1.f, s);
}

template <typename T>
void rope_backward(T* dx, const float* cos, const float* sin, const int32_t* positions, int64_t tokens,
                   int64_t n_heads, int64_t head_dim, int64_t rot_dim, cudaStream_t s) {
  rotate("rope_backward", dx, cos, sin, positions, tokens, n_heads, head_dim, rot_dim, -1.f, s);
}

template void rope_forward<float>(float*, const float*, const float*, const int32_t*, int64_t, int64_t, int64_t,
                                  int64_t, cudaStream_t);
template void rope_forward<__nv_bfloat16>(__nv_bfloat16*, const float*, const float*, const int32_t*, int64_t,
                                          int64_t, int64_t, int64_t, cudaStream_t);
template void rope_backward<float>(float*, const float*, const float*, const int32_t*, int64_t, int64_t, int64_t,
                                   int64_t, cudaStream_t);
template void rope_backward<__nv_bfloat16>(__nv_bfloat16*, const float*, const float*, const int32_t*, int64_t,
                                           int64_t, int64_t, int64_t, cudaStream_t);

}  // namespace mt::cuda
