// Token embedding y[t] = table[ids[t]] and its backward dtable[ids[t]] += dy[t] (fp32 dtable, deterministic).
// Invariant: backward stably sorts (id, token) pairs, then one thread per (distinct id, column vector) adds that id's
// dy rows in increasing token order: no atomics, and in fp32 the very sums (same order) of the CPU reference.
#include <cub/device/device_radix_sort.cuh>
#include <limits>

#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int threads = 256;

template <typename T, int N>
__global__ void embedding_forward_kernel(T* __restrict__ y, const T* __restrict__ table, const int32_t* __restrict__ ids,
                                         int64_t tokens, int64_t H) {
  const int64_t hv = H / N;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < tokens * hv; v += stride) {
    const int64_t t = v / hv, c = (v % hv) * N;
    *reinterpret_cast<Pack<T, N>*>(y + t * H + c) =
        *reinterpret_cast<const Pack<T, N>*>(table + static_cast<int64_t>(ids[t]) * H + c);
  }
}

__global__ void iota_kernel(int32_t* p, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    p[i] = static_cast<int32_t>(i);
  }
}

// Work item (p, column vector c) over sorted positions: only the first position of each id's run works; it walks the
// run (tokens ascending, the sort being stable) and adds the dy rows to the id's dtable row, N columns at a time.
template <typename T, int N>
__global__ void embedding_backward_kernel(float* __restrict__ dtable, const T* __restrict__ dy,
                                          const int32_t* __restrict__ sorted_ids,
                                          const int32_t* __restrict__ sorted_tokens, int64_t tokens, int64_t H) {
  const int64_t hv = H / N;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < tokens * hv; v += stride) {
    const int64_t p = v / hv, c = (v % hv) * N;
    const int32_t id = sorted_ids[p];
    if (p > 0 && sorted_ids[p - 1] == id) continue;
    float* row = dtable + static_cast<int64_t>(id) * H + c;
    float acc[N];
    load_f32<float, N>(acc, row);
    for (int64_t q = p; q < tokens && sorted_ids[q] == id; ++q) {
      float d[N];
      load_f32<T, N>(d, dy + static_cast<int64_t>(sorted_tokens[q]) * H + c);
#pragma unroll
      for (int i = 0; i < N; ++i) acc[i] += d[i];
    }
    store_f32<float, N>(row, acc);
  }
}

}  // namespace

template <typename T>
void embedding_forward(T* y, const T* table, const int32_t* ids, int64_t tokens, int64_t H, cudaStream_t s) {
  MT_ASSERT(tokens >= 0 && H > 0, "embedding_forward: tokens {} H {}", tokens, H);
  if (tokens == 0) return;
  constexpr int N = vec16<T>;
  if (vec_ok(N, {H}, {y, table})) {
    embedding_forward_kernel<T, N><<<grid_for(tokens * H / N, threads), threads, 0, s>>>(y, table, ids, tokens, H);
  } else {
    embedding_forward_kernel<T, 1><<<grid_for(tokens * H, threads), threads, 0, s>>>(y, table, ids, tokens, H);
  }
  MT_CHECK_LAUNCH("embedding_forward", "tokens={} H={}", tokens, H);
}

template <typename T>
void embedding_backward(float* dtable, const T* dy, const int32_t* ids, int64_t tokens, int64_t H, cudaStream_t s) {
  MT_ASSERT(tokens >= 0 && H > 0, "embedding_backward: tokens {} H {}", tokens, H);
  MT_ASSERT(tokens <= std::numeric_limits<int32_t>::max(), "embedding_backward: tokens {} exceed int32", tokens);
  if (tokens == 0) return;
  const char* op = "embedding_backward";
  Scratch<int32_t> token_in(op, tokens, s), ids_out(op, tokens, s), token_out(op, tokens, s);
  iota_kernel<<<grid_for(tokens, threads), threads, 0, s>>>(token_in.get(), tokens);
  MT_CHECK_LAUNCH(op, "iota tokens={}", tokens);
  const int n = static_cast<int>(tokens);
  size_t temp_bytes = 0;
  MT_CUDA_CHECK(op, cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, ids, ids_out.get(), token_in.get(),
                                                     token_out.get(), n, 0, 32, s));
  Scratch<unsigned char> temp(op, static_cast<int64_t>(temp_bytes), s);
  MT_CUDA_CHECK(op, cub::DeviceRadixSort::SortPairs(temp.get(), temp_bytes, ids, ids_out.get(), token_in.get(),
                                                     token_out.get(), n, 0, 32, s));
  constexpr int N = vec16<T>;
  if (vec_ok(N, {H}, {dtable, dy})) {
    embedding_backward_kernel<T, N><<<grid_for(tokens * H / N, threads), threads, 0, s>>>(
        dtable, dy, ids_out.get(), token_out.get(), tokens, H);
  } else {
    embedding_backward_kernel<T, 1><<<grid_for(tokens * H, threads), threads, 0, s>>>(
        dtable, dy, ids_out.get(), token_out.get(), tokens, H);
  }
  MT_CHECK_LAUNCH(op, "tokens={} H={}", tokens, H);
}

template void embedding_forward<float>(float*, const float*, const int32_t*, int64_t, int64_t, cudaStream_t);
template void embedding_forward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const int32_t*, int64_t, int64_t,
                                               cudaStream_t);
template void embedding_backward<float>(float*, const float*, const int32_t*, int64_t, int64_t, cudaStream_t);
template void embedding_backward<__nv_bfloat16>(float*, const __nv_bfloat16*, const int32_t*, int64_t, int64_t,
                                                cudaStream_t);

}  // namespace mt::cuda
