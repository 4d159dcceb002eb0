// The activations of one decoder layer: what its forward leaves for backward (LayerInternals: the values that
// cost a GEMM or attention to recompute) and the per-micro-batch scratch every layer shares (LayerScratch).
// Sizes come from the layer specs through internals_widths / scratch_widths alone: allocation, row views and the
// memory plan all use them. Invariant: a buffer whose width is 0 is null; widths are elements of the compute
// dtype per token (lse: fp32 per head and token).
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/model_spec.h"

namespace mt {

struct LayerInternals {
  // q, k before the q/k norm (layers with one); latent attention: q_a_proj's and the kv latent's before their norms.
  void *q_raw = nullptr, *k_raw = nullptr;
  void *q = nullptr, *k = nullptr, *v = nullptr, *attn = nullptr;  // normed and rotated q, k; v; attention output
  void* attn_out = nullptr;                 // output projection before its post-norm (post_norms)
  void* h1 = nullptr;                       // residual stream after attention
  void *gate = nullptr, *up = nullptr;      // MLP projections
  void* mlp_out = nullptr;                  // down projection before its post-norm (post_norms)
  real* lse = nullptr;                      // [seqs, n_heads, seq_len]
  // Gated attention (output_gate): the gate before its sigmoid, and attn·σ(gate) (o_proj's input).
  void *out_gate = nullptr, *gated_attn = nullptr;
  // Gated DeltaNet: in_proj q|k|v (the conv's input), the conv's output, z, b|a, the delta rule's output and the
  // gated norm's output (out_proj's input); g and beta in fp32.
  void *dn_qkv_raw = nullptr, *dn_qkv = nullptr, *dn_z = nullptr, *dn_ba = nullptr, *dn_core = nullptr,
       *dn_normed = nullptr;
  real *dn_g = nullptr, *dn_beta = nullptr;   // [tokens, n_v_heads]
  // Multi-head latent attention: the normed low-rank query (q_b_proj's input) and the normed kv latent (kv_b_proj's).
  void *mla_q_latent = nullptr, *mla_kv_latent = nullptr;
  // Lightning attention: qkv_proj's output (before the SiLU the op applies) and the norm's output; the attention
  // output is attn, output_gate's out_gate and σ(out_gate)·normed (out_proj's input) gated_attn.
  void *lt_qkv = nullptr, *lt_normed = nullptr;
};

// Per-token widths, in LayerInternals member order; lse_heads: fp32 lse values per token.
struct InternalsWidths {
  int64_t q_raw = 0, k_raw = 0, q = 0, k = 0, v = 0, attn = 0, attn_out = 0, h1 = 0, gate = 0, up = 0, mlp_out = 0;
  int64_t lse_heads = 0;
  int64_t out_gate = 0, gated_attn = 0;
  int64_t dn_qkv_raw = 0, dn_qkv = 0, dn_z = 0, dn_ba = 0, dn_core = 0, dn_normed = 0;
  int64_t dn_heads = 0;  // fp32 dn_g and dn_beta values per token, each
  int64_t mla_q_latent = 0, mla_kv_latent = 0;
  int64_t lt_qkv = 0, lt_normed = 0;
  int64_t elements() const {
    return q_raw + k_raw + q + k + v + attn + attn_out + h1 + gate + up + mlp_out + out_gate + gated_attn +
           dn_qkv_raw + dn_qkv + dn_z + dn_ba + dn_core + dn_normed + mla_q_latent + mla_kv_latent + lt_qkv + lt_normed;
  }
  int64_t fp32_elements() const { return lse_heads + 2 * dn_heads; }  // per token
};
// with_raw: also q_raw/k_raw (the workspace keeps them; a saved layer needs them only with a q/k norm; a latent-attention
// layer always has them).
InternalsWidths internals_widths(const LayerSpec& layer, int64_t hidden, bool with_raw);
// What layer `layer` keeps when it saves its internals (q_raw/k_raw only with a q/k norm).
InternalsWidths saved_layer_widths(const ModelSpec& spec, int64_t layer);
// The widest of every layer's, buffer by buffer (the workspace's internals, used by any layer that saves none),
// without gate and up, which such a layer keeps only per token chunk (MlpChunk).
InternalsWidths max_internals_widths(const ModelSpec& spec);

// Internals for `seqs` sequences of seq_len tokens in backend memory, the buffers appended to `owned`.
LayerInternals allocate_internals(Backend& backend, const InternalsWidths& w, int64_t seqs, int64_t seq_len,
                                  std::vector<void*>& owned);
// The rows of sequences [first_seq, first_seq + seqs) of internals laid out for sequences of seq_len tokens.
LayerInternals internals_rows(const LayerInternals& all, const InternalsWidths& w, int64_t element_size,
                              int64_t first_seq, int64_t seq_len);

// Scratch for one micro-batch: recomputed even from saved internals (norm1, norm2) and backward's gradients.
// The feed-forward's own buffers are per token chunk (MlpChunk).
struct LayerScratch {
  void *norm1 = nullptr, *norm2 = nullptr;
  void *d_hidden = nullptr, *d_norm = nullptr, *d_block = nullptr, *d_attn = nullptr;
  void *dq = nullptr, *dk = nullptr, *dv = nullptr;
  void* d_out_gate = nullptr;  // output_gate: ∂/∂ the gate rows of q_proj
  // Gated DeltaNet backward: ∂/∂ normed, core, z, conv output, conv input, b|a; dg and dbeta in fp32.
  void *dn_d_normed = nullptr, *dn_d_core = nullptr, *dn_d_z = nullptr, *dn_d_qkv = nullptr, *dn_d_qkv_raw = nullptr,
       *dn_d_ba = nullptr;
  real *dn_dg = nullptr, *dn_dbeta = nullptr;
  // Multi-head latent attention: forward, the query's no-rope and rope parts, the keys' no-rope part and the shared
  // rotary key (head_concat's inputs); backward, their gradients; and ∂/∂ the latents, normed and raw.
  void *mla_q_nope = nullptr, *mla_q_rope = nullptr, *mla_k_nope = nullptr, *mla_k_rope = nullptr;
  void *mla_d_q_latent = nullptr, *mla_d_q_raw = nullptr, *mla_d_kv_latent = nullptr, *mla_d_kv_raw = nullptr;
  // Lightning attention backward: ∂/∂ the attention output and ∂/∂ qkv_proj's output (d_attn holds ∂/∂ out_proj's
  // input, then ∂/∂ the norm's output; d_out_gate ∂/∂ output_gate's).
  void *lt_d_core = nullptr, *lt_d_qkv = nullptr;
};
struct ScratchWidths {
  int64_t norm1 = 0, norm2 = 0, d_hidden = 0, d_norm = 0, d_block = 0, d_attn = 0;
  int64_t dq = 0, dk = 0, dv = 0;
  int64_t d_out_gate = 0;
  int64_t dn_d_normed = 0, dn_d_core = 0, dn_d_z = 0, dn_d_qkv = 0, dn_d_qkv_raw = 0, dn_d_ba = 0;
  int64_t dn_heads = 0;  // fp32 dn_dg and dn_dbeta values per token, each
  int64_t mla_q_nope = 0, mla_q_rope = 0, mla_k_nope = 0, mla_k_rope = 0;
  int64_t mla_d_q_latent = 0, mla_d_q_raw = 0, mla_d_kv_latent = 0, mla_d_kv_raw = 0;
  int64_t lt_d_core = 0, lt_d_qkv = 0;
  int64_t elements() const {
    return norm1 + norm2 + d_hidden + d_norm + d_block + d_attn + dq + dk + dv + d_out_gate + dn_d_normed + dn_d_core +
           dn_d_z + dn_d_qkv + dn_d_qkv_raw + dn_d_ba + mla_q_nope + mla_q_rope + mla_k_nope + mla_k_rope +
           mla_d_q_latent + mla_d_q_raw + mla_d_kv_latent + mla_d_kv_raw + lt_d_core + lt_d_qkv;
  }
  int64_t fp32_elements() const { return 2 * dn_heads; }  // per token
};
ScratchWidths scratch_widths(const ModelSpec& spec);  // the widest over the layers
LayerScratch allocate_scratch(Backend& backend, const ScratchWidths& w, int64_t tokens, std::vector<void*>& owned);

// The feed-forward runs over a micro-batch in chunks of at most token_chunk tokens, so its buffers (the widest
// layer's intermediate width per token) do not grow with the sequence: gate and up (a layer that saves its internals
// keeps them over the pass instead), act, and backward's d_act, d_gate, d_up.
struct MlpChunk {
  void *gate = nullptr, *up = nullptr, *act = nullptr, *d_act = nullptr, *d_gate = nullptr, *d_up = nullptr;
};
inline constexpr int64_t kMlpChunkBuffers = 6;
// Tokens per feed-forward chunk when the run leaves it to the plan: a long sequence's GEMMs stay large.
inline constexpr int64_t kDefaultTokenChunk = 16384;
// The chunk of a micro-batch of mb_tokens tokens (requested 0: kDefaultTokenChunk).
int64_t token_chunk_for(int64_t mb_tokens, int64_t requested);
int64_t mlp_chunk_width(const ModelSpec& spec);  // the widest dense (non-MoE) layer's intermediate size
MlpChunk allocate_mlp_chunk(Backend& backend, int64_t width, int64_t tokens, std::vector<void*>& owned);

}  // namespace mt
