// The device scratch of the CUDA gated delta rule: the one definition that kernels/ops/gated_delta_rule_chunked.cu
// carves its allocation by and the memory plan sizes the layer workspace by (plan/memory_plan.cpp), and which kernel
// runs for a shape (the chunked one for head dims up to 128, the recurrent kernels/ops/gated_delta_rule.cu beyond).
// Invariant: pure arithmetic on the shape; every array starts on a 256-byte boundary.
#pragma once
#include <cstdint>

#include "backend/backend.h"

namespace mt {

inline constexpr int64_t kDeltaRuleChunkedMaxHeadDim = 128;

inline bool delta_rule_chunked_supports(const DeltaRuleShape& s) {
  return s.k_head_dim <= kDeltaRuleChunkedMaxHeadDim && s.v_head_dim <= kDeltaRuleChunkedMaxHeadDim;
}

// Tokens per chunk: 64 for bf16 (tensor cores); 32 for fp32, whose fp32 operands would not fit in shared memory
// at 64.
inline constexpr int64_t delta_rule_chunk(int64_t element_bytes) { return element_bytes == 4 ? 32 : 64; }

// Byte offsets of the chunked kernels' arrays in one allocation. Per token: q̂, k̂ [T, n_k_heads, k_head_dim]
// (elements). Per (sequence, v head, chunk) in that order: the masked scores Q̂K̂ᵀ ⊙ D [C, C], U [C, v_head_dim]
// and W [C, k_head_dim] (elements); the forward needs no more (its state recurrence writes the output). Backward
// adds T = (I + A)⁻¹ [C, C], V' [C, v_head_dim], the state entering the chunk and the gradient of the state leaving
// it [k_head_dim, v_head_dim] and dV', all in elements (the kernels keep states in fp32 and store them at the
// precision of the products that read them), and per token and v head the fp32 parts of dq̂, dk̂
// [T, n_v_heads, k_head_dim].
struct DeltaRuleChunkedLayout {
  int64_t chunk = 0, chunks = 0;  // per sequence
  int64_t qn = 0, kn = 0, tm = 0, p = 0, u = 0, vn = 0, w = 0, h = 0;
  int64_t dh = 0, dvn = 0, dq_part = 0, dk_part = 0;
  int64_t bytes = 0;
};

inline DeltaRuleChunkedLayout delta_rule_chunked_layout(const DeltaRuleShape& s, int64_t element_bytes,
                                                        bool backward) {
  DeltaRuleChunkedLayout l;
  l.chunk = delta_rule_chunk(element_bytes);
  l.chunks = (s.seq + l.chunk - 1) / l.chunk;
  const int64_t T = s.batch * s.seq, heads = s.batch * s.n_v_heads * l.chunks, C = l.chunk;
  const int64_t dk = s.k_head_dim, dv = s.v_head_dim, es = element_bytes;
  const auto take = [&](int64_t bytes) {
    const int64_t at = l.bytes;
    l.bytes += (bytes + 255) / 256 * 256;
    return at;
  };
  l.qn = take(T * s.n_k_heads * dk * es);
  l.kn = take(T * s.n_k_heads * dk * es);
  l.p = take(heads * C * C * es);
  l.u = take(heads * C * dv * es);
  l.w = take(heads * C * dk * es);
  if (!backward) return l;
  l.tm = take(heads * C * C * es);
  l.vn = take(heads * C * dv * es);
  l.h = take(heads * dk * dv * es);
  l.dh = take(heads * dk * dv * es);
  l.dvn = take(heads * C * dv * es);
  l.dq_part = take(T * s.n_v_heads * dk * 4);
  l.dk_part = take(T * s.n_v_heads * dk * 4);
  return l;
}

// The recurrent kernel's backward scratch: per (sequence, v head, tile of 32 state columns) the tile's state at
// every 64-token chunk start and over one chunk, and fp32 dq, dk, dg, dbeta per token, v head and tile.
inline int64_t delta_rule_recurrent_scratch_bytes(const DeltaRuleShape& s) {
  const int64_t tiles = (s.v_head_dim + 31) / 32, T = s.batch * s.seq;
  const int64_t states = s.batch * s.n_v_heads * tiles * ((s.seq + 63) / 64 + 64) * s.k_head_dim * 32 * 4;
  const int64_t parts = T * s.n_v_heads * tiles * (2 * s.k_head_dim + 2) * 4;
  return states + parts;
}

// The most the backward (the larger pass) allocates for `s`.
inline int64_t delta_rule_scratch_bytes(const DeltaRuleShape& s, int64_t element_bytes) {
  return delta_rule_chunked_supports(s) ? delta_rule_chunked_layout(s, element_bytes, true).bytes
                                        : delta_rule_recurrent_scratch_bytes(s);
}

}  // namespace mt
