// Per-head concatenation y[t, h] = a[t, h] | b[t, h] (multi-head latent attention's [nope | rope] queries and keys;
// b one row per token for every head where shared_b), forward and backward. Invariant: copies are exact in T; a
// shared part's gradient sums the heads in order in fp32 (one thread per output element, no atomics) and rounds
// once; grid-stride, any size.
#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int threads = 256;

template <typename T>
__global__ void head_concat_forward_kernel(T* y, const T* a, const T* b, int64_t n, int64_t H, int64_t a_dim,
                                           int64_t b_dim, bool shared_b) {
  const int64_t d = a_dim + b_dim, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t row = i / d, c = i % d, t = row / H;
    y[i] = c < a_dim ? a[row * a_dim + c] : b[(shared_b ? t : row) * b_dim + (c - a_dim)];
  }
}

// da from dy's a parts; db from its b parts (per head), one element per thread.
template <typename T>
__global__ void head_concat_split_kernel(T* da, T* db, const T* dy, int64_t n, int64_t a_dim, int64_t b_dim,
                                         bool write_b) {
  const int64_t d = a_dim + b_dim, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t row = i / d, c = i % d;
    if (c < a_dim)
      da[row * a_dim + c] = dy[i];
    else if (write_b)
      db[row * b_dim + (c - a_dim)] = dy[i];
  }
}

// db[t, c] = Σ_h dy[t, h, a_dim + c], heads in order.
template <typename T>
__global__ void head_concat_shared_sum_kernel(T* db, const T* dy, int64_t n, int64_t H, int64_t a_dim, int64_t b_dim) {
  const int64_t d = a_dim + b_dim, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t t = i / b_dim, c = i % b_dim;
    float acc = 0.f;
    for (int64_t h = 0; h < H; ++h) acc += to_f32(dy[(t * H + h) * d + a_dim + c]);
    db[i] = from_f32<T>(acc);
  }
}

}  // namespace

template <typename T>
void head_concat_forward(T* y, const T* a, const T* b, int64_t tokens, int64_t H, int64_t a_dim, int64_t b_dim,
                         bool shared_b, cudaStream_t s) {
  MT_ASSERT(tokens >= 0 && H > 0 && a_dim >= 0 && b_dim >= 0, "head_concat_forward: T={} H={} a={} b={}", tokens, H,
            a_dim, b_dim);
  const int64_t n = tokens * H * (a_dim + b_dim);
  if (n == 0) return;
  head_concat_forward_kernel<T><<<grid_for(n, threads), threads, 0, s>>>(y, a, b, n, H, a_dim, b_dim, shared_b);
  MT_CHECK_LAUNCH("head_concat_forward", "T={} H={} a={} b={}", tokens, H, a_dim, b_dim);
}

template <typename T>
void head_concat_backward(T* da, T* db, const T* dy, int64_t tokens, int64_t H, int64_t a_dim, int64_t b_dim,
                          bool shared_b, cudaStream_t s) {
  MT_ASSERT(tokens >= 0 && H > 0 && a_dim >= 0 && b_dim >= 0, "head_concat_backward: T={} H={} a={} b={}", tokens, H,
            a_dim, b_dim);
  const int64_t n = tokens * H * (a_dim + b_dim);
  if (n == 0) return;
  head_concat_split_kernel<T><<<grid_for(n, threads), threads, 0, s>>>(da, db, dy, n, a_dim, b_dim, !shared_b);
  MT_CHECK_LAUNCH("head_concat_backward", "T={} H={} a={} b={}", tokens, H, a_dim, b_dim);
  if (!shared_b || b_dim == 0) return;
  const int64_t nb = tokens * b_dim;
  head_concat_shared_sum_kernel<T><<<grid_for(nb, threads), threads, 0, s>>>(db, dy, nb, H, a_dim, b_dim);
  MT_CHECK_LAUNCH("head_concat_backward (shared part)", "T={} H={} b={}", tokens, H, b_dim);
}

template void head_concat_forward<float>(float*, const float*, const float*, int64_t, int64_t, int64_t, int64_t, bool,
                                         cudaStream_t);
template void head_concat_forward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, int64_t,
                                                 int64_t, int64_t, int64_t, bool, cudaStream_t);
template void head_concat_backward<float>(float*, float*, const float*, int64_t, int64_t, int64_t, int64_t, bool,
                                          cudaStream_t);
template void head_concat_backward<__nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, const __nv_bfloat16*, int64_t,
                                                  int64_t, int64_t, int64_t, bool, cudaStream_t);

}  // namespace mt::cuda
