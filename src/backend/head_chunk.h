// The CUDA backend's chunked LM head (head_loss_rows): the one definition of its buffers' shape that
// kernels/runtime/cuda_backend.cu allocates and the memory plan sizes (plan/memory_plan.cpp).
// Invariant: pure arithmetic on the vocabulary; the logits' row stride is a multiple of 64 elements, so every row of
// the fp32 logits and of the bf16 or fp32 dlogits starts 16-byte aligned whatever the vocabulary (an odd one, as
// Hunyuan's 128 167 or Granite's 49 159, would leave cuBLASLt only its unvectorised kernels and the cross-entropy its
// scalar path).
#pragma once
#include <algorithm>
#include <cstdint>

namespace mt {

// Token rows per chunk: about 2^28 logits (1 GiB of fp32) a chunk, 16 to 4096 rows.
inline int64_t head_chunk_rows(int64_t vocab) {
  return std::clamp<int64_t>((int64_t{1} << 28) / std::max<int64_t>(vocab, 1), 16, 4096);
}

// Elements from one logits row to the next: the vocabulary rounded up to 64.
inline constexpr int64_t head_logits_stride(int64_t vocab) { return (vocab + 63) / 64 * 64; }

}  // namespace mt
