// The padded rows of cuDNN's attention outputs (see cudnn_attention.h): cuDNN leaves rows past a sequence's length
// as its kernels left them; our attention contract has them 0 (out, lse and the gradients).
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cudnn_attention.h"

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

}  // namespace mt::cuda
