// The row work around cuDNN's attention (see cudnn_attention.h): padded rows of its outputs become 0 (cuDNN leaves
// rows past a sequence's length as its kernels left them; our attention contract has them 0), and a batch of
// sequences of length seq is staged into (and back out of) the layout of a longer bucket length, pad rows 0; the tiled
// backward's fp32 sums of its tiles' bf16 gradients and its padded rows' lse; packed segments gathered into their
// virtual batch (segment_batch.h) and scattered back; the ragged forward's offsets.
#include <algorithm>
#include <cstdint>

#include "kernels/ops/cuda_check.h"
#include "kernels/attention/cudnn_attention.h"
#include "core/error.h"

namespace mt::cuda {
namespace {

// Block per row of x; a row i of sequence b at or past lens[b] becomes 0.
__global__ void zero_padded_rows_kernel(__nv_bfloat16* x, int64_t width, const int32_t* lens, int seq) {
  const int64_t row = blockIdx.x;
  const int b = static_cast<int>(row / seq), i = static_cast<int>(row % seq);
  if (i < min(max(lens[b], 0), seq)) return;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) x[row * width + c] = __float2bfloat16(0.f);
}

__global__ void zero_padded_lse_kernel(float* lse, const int32_t* lens, int seq, int heads, int64_t n) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n) return;
  const int b = static_cast<int>(idx / (static_cast<int64_t>(heads) * seq)), i = static_cast<int>(idx % seq);
  if (i >= min(max(lens[b], 0), seq)) lse[idx] = 0.f;
}

// Thread per sequence (and one for the end entry): see ragged_offsets.
__global__ void ragged_offsets_kernel(int32_t* q_offsets, int32_t* kv_offsets, int32_t* lens_out,
                                      const int32_t* starts, const int32_t* lens, int64_t n, int64_t seq,
                                      int64_t q_width, int64_t kv_width, int64_t end_row) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i > n) return;
  int64_t row = end_row, len = 0;
  if (i < n && starts == nullptr) {
    row = i * seq;
    len = lens == nullptr ? seq : min(max(static_cast<int64_t>(lens[i]), int64_t{0}), seq);
  } else if (i < n && starts[i] >= 0) {
    row = starts[i];
    len = lens[i];
  }
  q_offsets[i] = static_cast<int32_t>(row * q_width);
  kv_offsets[i] = static_cast<int32_t>(row * kv_width);
  if (i < n) lens_out[i] = static_cast<int32_t>(len);
}

__global__ void fill_ints_kernel(int32_t* dst, int64_t n, int32_t value) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = value;
}

__global__ void tile_lengths_kernel(int32_t* dst, const int32_t* lens, int64_t n, int64_t row0, int64_t rows) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = static_cast<int32_t>(min(max(static_cast<int64_t>(lens[i]) - row0, int64_t{1}), rows));
}

// Eight elements (16 bytes of bf16) per thread: width is a multiple of 8 (head_dim is).
__global__ void accumulate_rows_kernel(float* acc, int64_t acc_stride, const __nv_bfloat16* x, int64_t x_stride,
                                       int64_t rows, int64_t width, bool assign, int64_t n) {
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t e = idx * 8, c = e % width, r = (e / width) % rows, g = e / (width * rows);
    const uint4 raw = *reinterpret_cast<const uint4*>(x + g * x_stride + r * width + c);
    const auto* v = reinterpret_cast<const __nv_bfloat162*>(&raw);
    float* a = acc + g * acc_stride + r * width + c;
    float4 lo = assign ? float4{0.f, 0.f, 0.f, 0.f} : *reinterpret_cast<float4*>(a);
    float4 hi = assign ? float4{0.f, 0.f, 0.f, 0.f} : *reinterpret_cast<float4*>(a + 4);
    const float2 v0 = __bfloat1622float2(v[0]), v1 = __bfloat1622float2(v[1]);
    const float2 v2 = __bfloat1622float2(v[2]), v3 = __bfloat1622float2(v[3]);
    lo = float4{lo.x + v0.x, lo.y + v0.y, lo.z + v1.x, lo.w + v1.y};
    hi = float4{hi.x + v2.x, hi.y + v2.y, hi.z + v3.x, hi.w + v3.y};
    *reinterpret_cast<float4*>(a) = lo;
    *reinterpret_cast<float4*>(a + 4) = hi;
  }
}

__global__ void store_rows_kernel(__nv_bfloat16* dst, int64_t dst_stride, const float* src, int64_t src_stride,
                                  int64_t rows, int64_t width, int64_t n) {
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t e = idx * 8, c = e % width, r = (e / width) % rows, g = e / (width * rows);
    const float* a = src + g * src_stride + r * width + c;
    const float4 lo = *reinterpret_cast<const float4*>(a), hi = *reinterpret_cast<const float4*>(a + 4);
    uint4 raw;
    auto* v = reinterpret_cast<__nv_bfloat162*>(&raw);
    v[0] = __floats2bfloat162_rn(lo.x, lo.y);
    v[1] = __floats2bfloat162_rn(lo.z, lo.w);
    v[2] = __floats2bfloat162_rn(hi.x, hi.y);
    v[3] = __floats2bfloat162_rn(hi.z, hi.w);
    *reinterpret_cast<uint4*>(dst + g * dst_stride + r * width + c) = raw;
  }
}

// dst [groups, rows, words] = src [groups, src_rows, words] rows [row0, row0 + rows); rows past src_rows 0.
template <typename W>
__global__ void gather_rows_kernel(W* dst, const W* src, int64_t src_rows, int64_t row0, int64_t rows, int64_t words,
                                   int64_t n) {
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t w = idx % words, r = (idx / words) % rows, g = idx / (words * rows), from = row0 + r;
    dst[idx] = from < src_rows ? src[(g * src_rows + from) * words + w] : W{};
  }
}

__global__ void gather_lse_kernel(float* dst, const float* lse, int64_t heads, int64_t seq, int64_t row0,
                                  int64_t rows, const int32_t* lens, int64_t n) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n) return;
  const int64_t r = idx % rows, bh = idx / rows, b = bh / heads, from = row0 + r;
  const int64_t valid = lens != nullptr ? (lens[b] < 0 ? 0 : (lens[b] < seq ? lens[b] : seq)) : seq;
  dst[idx] = from < valid ? lse[bh * seq + from] : kCudnnPadLse;
}

// A virtual batch's rows (segment_batch.h): row i of virtual sequence b is the packed call's row starts[b] + i where
// starts[b] >= 0 and i < lens[b], else padding. gather: dst [n, seq, words] from the packed rows, padding 0;
// scatter: the packed rows from src [n, seq, words], padding dropped.
template <typename W, bool Gather>
__global__ void segment_rows_kernel(W* dst, const W* src, const int32_t* starts, const int32_t* lens, int64_t seq,
                                    int64_t words, int64_t n) {
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t w = idx % words, r = idx / words, b = r / seq, i = r % seq;
    const bool valid = starts[b] >= 0 && i < lens[b];
    if (Gather)
      dst[idx] = valid ? src[(starts[b] + i) * words + w] : W{};
    else if (valid)
      dst[(starts[b] + i) * words + w] = src[idx];
  }
}

// The same for lse: virtual [n, heads, seq] against the packed call's [batch, heads, call_seq] (row t of the packed
// call is sequence t / call_seq, position t % call_seq): the packed index of element idx, -1 for padding.
__device__ int64_t packed_lse_index(int64_t idx, const int32_t* starts, const int32_t* lens, int64_t heads,
                                    int64_t seq, int64_t call_seq) {
  const int64_t i = idx % seq, h = (idx / seq) % heads, b = idx / (seq * heads);
  if (starts[b] < 0 || i >= lens[b]) return -1;
  const int64_t t = starts[b] + i;
  return (t / call_seq * heads + h) * call_seq + t % call_seq;
}

// Gathered padding 0, as a staged call's.
__global__ void gather_segment_lse_kernel(float* dst, const float* lse, const int32_t* starts, const int32_t* lens,
                                          int64_t heads, int64_t seq, int64_t call_seq, int64_t n) {
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t at = packed_lse_index(idx, starts, lens, heads, seq, call_seq);
    dst[idx] = at >= 0 ? lse[at] : 0.f;
  }
}

__global__ void scatter_segment_lse_kernel(float* lse, const float* src, const int32_t* starts, const int32_t* lens,
                                           int64_t heads, int64_t seq, int64_t call_seq, int64_t n) {
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t at = packed_lse_index(idx, starts, lens, heads, seq, call_seq);
    if (at >= 0) lse[at] = src[idx];
  }
}

unsigned grid_for(int64_t n) { return static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 65536)); }

}  // namespace

void accumulate_rows(float* acc, int64_t acc_stride, const __nv_bfloat16* x, int64_t x_stride, int64_t groups,
                     int64_t rows, int64_t width, bool assign, cudaStream_t stream) {
  MT_ASSERT(width % 8 == 0 && acc_stride % 8 == 0 && x_stride % 8 == 0, "accumulate_rows: width {}", width);
  const int64_t n = groups * rows * width / 8;
  if (n == 0) return;
  accumulate_rows_kernel<<<grid_for(n), 256, 0, stream>>>(acc, acc_stride, x, x_stride, rows, width, assign, n);
  MT_CHECK_CUDA(cudaGetLastError());
}

void store_rows(__nv_bfloat16* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t groups,
                int64_t rows, int64_t width, cudaStream_t stream) {
  MT_ASSERT(width % 8 == 0 && dst_stride % 8 == 0 && src_stride % 8 == 0, "store_rows: width {}", width);
  const int64_t n = groups * rows * width / 8;
  if (n == 0) return;
  store_rows_kernel<<<grid_for(n), 256, 0, stream>>>(dst, dst_stride, src, src_stride, rows, width, n);
  MT_CHECK_CUDA(cudaGetLastError());
}

void gather_rows(void* dst, const void* src, int64_t groups, int64_t src_rows, int64_t row0, int64_t rows,
                 int64_t row_bytes, cudaStream_t stream) {
  MT_ASSERT(row_bytes % 4 == 0, "gather_rows: row of {} bytes", row_bytes);
  const bool vec =
      row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(dst) % 16 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0;
  const int64_t words = row_bytes / (vec ? 16 : 4), n = groups * rows * words;
  if (n == 0) return;
  if (vec) {
    gather_rows_kernel<uint4><<<grid_for(n), 256, 0, stream>>>(static_cast<uint4*>(dst), static_cast<const uint4*>(src),
                                                               src_rows, row0, rows, words, n);
  } else {
    gather_rows_kernel<uint32_t><<<grid_for(n), 256, 0, stream>>>(
        static_cast<uint32_t*>(dst), static_cast<const uint32_t*>(src), src_rows, row0, rows, words, n);
  }
  MT_CHECK_CUDA(cudaGetLastError());
}

namespace {

template <bool Gather>
void segment_rows(void* dst, const void* src, const int32_t* starts, const int32_t* lens, int64_t n, int64_t seq,
                  int64_t row_bytes, cudaStream_t stream) {
  MT_ASSERT(row_bytes % 4 == 0, "segment rows: a row of {} bytes", row_bytes);
  const bool vec =
      row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(dst) % 16 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0;
  const int64_t words = row_bytes / (vec ? 16 : 4), total = n * seq * words;
  if (total == 0) return;
  if (vec)
    segment_rows_kernel<uint4, Gather><<<grid_for(total), 256, 0, stream>>>(
        static_cast<uint4*>(dst), static_cast<const uint4*>(src), starts, lens, seq, words, total);
  else
    segment_rows_kernel<uint32_t, Gather><<<grid_for(total), 256, 0, stream>>>(
        static_cast<uint32_t*>(dst), static_cast<const uint32_t*>(src), starts, lens, seq, words, total);
  MT_CHECK_CUDA(cudaGetLastError());
}

}  // namespace

void gather_segment_rows(void* dst, const void* src, const int32_t* starts, const int32_t* lens, int64_t n,
                         int64_t seq, int64_t row_bytes, cudaStream_t stream) {
  segment_rows<true>(dst, src, starts, lens, n, seq, row_bytes, stream);
}

void scatter_segment_rows(void* dst, const void* src, const int32_t* starts, const int32_t* lens, int64_t n,
                          int64_t seq, int64_t row_bytes, cudaStream_t stream) {
  segment_rows<false>(dst, src, starts, lens, n, seq, row_bytes, stream);
}

void gather_segment_lse(float* dst, const float* lse, const int32_t* starts, const int32_t* lens, int64_t n,
                        int64_t heads, int64_t seq, int64_t call_seq, cudaStream_t stream) {
  const int64_t total = n * heads * seq;
  if (total == 0) return;
  gather_segment_lse_kernel<<<grid_for(total), 256, 0, stream>>>(dst, lse, starts, lens, heads, seq, call_seq, total);
  MT_CHECK_CUDA(cudaGetLastError());
}

void scatter_segment_lse(float* lse, const float* src, const int32_t* starts, const int32_t* lens, int64_t n,
                         int64_t heads, int64_t seq, int64_t call_seq, cudaStream_t stream) {
  const int64_t total = n * heads * seq;
  if (total == 0) return;
  scatter_segment_lse_kernel<<<grid_for(total), 256, 0, stream>>>(lse, src, starts, lens, heads, seq, call_seq, total);
  MT_CHECK_CUDA(cudaGetLastError());
}

void gather_lse(float* lse_dst, const float* lse, int64_t batch, int64_t heads, int64_t seq, int64_t row0,
                int64_t rows, const int32_t* lens, cudaStream_t stream) {
  const int64_t n = batch * heads * rows;
  if (n == 0) return;
  gather_lse_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(lse_dst, lse, heads, seq, row0, rows,
                                                                                lens, n);
  MT_CHECK_CUDA(cudaGetLastError());
}

void zero_padded_attention_rows(__nv_bfloat16* x, int64_t width, float* lse, const AttnShape& s, cudaStream_t stream) {
  const int seq = static_cast<int>(s.seq);
  zero_padded_rows_kernel<<<static_cast<unsigned>(s.batch * s.seq), 128, 0, stream>>>(x, width, s.seq_lens, seq);
  MT_CHECK_CUDA(cudaGetLastError());
  if (lse == nullptr) return;
  const int64_t n = s.batch * s.n_heads * s.seq;
  zero_padded_lse_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(lse, s.seq_lens, seq,
                                                                                     static_cast<int>(s.n_heads), n);
  MT_CHECK_CUDA(cudaGetLastError());
}

void zero_padded_gradient_rows(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv, const AttnShape& s,
                               cudaStream_t stream) {
  if (s.seq_lens == nullptr) return;
  zero_padded_attention_rows(dq, s.n_heads * s.head_dim, nullptr, s, stream);
  zero_padded_attention_rows(dk, s.n_kv_heads * s.head_dim, nullptr, s, stream);
  zero_padded_attention_rows(dv, s.n_kv_heads * s.value_head_dim(), nullptr, s, stream);
}

void restride_rows(void* dst, const void* src, int64_t groups, int64_t from_rows, int64_t to_rows, int64_t row_bytes,
                   cudaStream_t stream) {
  gather_rows(dst, src, groups, from_rows, 0, to_rows, row_bytes, stream);
}

void ragged_offsets(int32_t* q_offsets, int32_t* kv_offsets, int32_t* lens_out, const int32_t* starts,
                    const int32_t* lens, int64_t n, int64_t seq, int64_t q_width, int64_t kv_width, int64_t end_row,
                    cudaStream_t stream) {
  MT_ASSERT(end_row * std::max(q_width, kv_width) <= INT32_MAX, "ragged offsets past int32: {} rows of {} elements",
            end_row, std::max(q_width, kv_width));
  ragged_offsets_kernel<<<static_cast<unsigned>((n + 1 + 255) / 256), 256, 0, stream>>>(
      q_offsets, kv_offsets, lens_out, starts, lens, n, seq, q_width, kv_width, end_row);
  MT_CHECK_CUDA(cudaGetLastError());
}

void fill_ints(int32_t* dst, int64_t n, int32_t value, cudaStream_t stream) {
  fill_ints_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(dst, n, value);
  MT_CHECK_CUDA(cudaGetLastError());
}

void tile_lengths(int32_t* dst, const int32_t* lens, int64_t n, int64_t row0, int64_t rows, cudaStream_t stream) {
  if (n == 0) return;
  tile_lengths_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(dst, lens, n, row0, rows);
  MT_CHECK_CUDA(cudaGetLastError());
}

}  // namespace mt::cuda
