// The row work around cuDNN's attention (see cudnn_attention.h): padded rows of its outputs become 0 (cuDNN leaves
// rows past a sequence's length as its kernels left them; our attention contract has them 0), and a batch of
// sequences of length seq is staged into (and back out of) the layout of a longer bucket length, pad rows 0.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cudnn_attention.h"
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

// dst [groups, to_rows, words] from src [groups, from_rows, words]: rows present in both are copied, dst rows past
// from_rows become 0. W is the copy unit (uint4 or uint32 words).
template <typename W>
__global__ void restride_rows_kernel(W* dst, const W* src, int64_t groups, int64_t from_rows, int64_t to_rows,
                                     int64_t words) {
  const int64_t n = groups * to_rows * words;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t w = idx % words, row = (idx / words) % to_rows, g = idx / (words * to_rows);
    dst[idx] = row < from_rows ? src[(g * from_rows + row) * words + w] : W{};
  }
}

__global__ void fill_ints_kernel(int32_t* dst, int64_t n, int32_t value) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = value;
}

}  // namespace

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

void restride_rows(void* dst, const void* src, int64_t groups, int64_t from_rows, int64_t to_rows, int64_t row_bytes,
                   cudaStream_t stream) {
  MT_ASSERT(row_bytes % 4 == 0, "restride_rows: row of {} bytes", row_bytes);
  const bool vec =
      row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(dst) % 16 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0;
  const int64_t words = row_bytes / (vec ? 16 : 4), n = groups * to_rows * words;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 65536));
  if (n == 0) return;
  if (vec) {
    restride_rows_kernel<uint4><<<blocks, 256, 0, stream>>>(static_cast<uint4*>(dst), static_cast<const uint4*>(src),
                                                            groups, from_rows, to_rows, words);
  } else {
    restride_rows_kernel<uint32_t><<<blocks, 256, 0, stream>>>(
        static_cast<uint32_t*>(dst), static_cast<const uint32_t*>(src), groups, from_rows, to_rows, words);
  }
  MT_CHECK_CUDA(cudaGetLastError());
}

void fill_ints(int32_t* dst, int64_t n, int32_t value, cudaStream_t stream) {
  fill_ints_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(dst, n, value);
  MT_CHECK_CUDA(cudaGetLastError());
}

}  // namespace mt::cuda
