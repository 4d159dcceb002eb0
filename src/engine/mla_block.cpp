// Multi-head latent attention forward and backward (see mla_block.h), following transformers' DeepseekV3Attention
// (DeepseekV2Attention, Glm4MoeLiteAttention): the rope parts rotate in interleaved pairs or rotate_half pairs by the
// layer's table (rope_interleave; DeepSeek-V2's complex rotation is the interleaved one, and V3's de-interleaving
// output order permutes q and k alike, so no score changes), the latent norms use their own eps, and the softmax
// scale is the AttentionSpec's (qk_head_dim^-0.5 · YaRN's mscale², family_deepseek.cpp).
#include "engine/mla_block.h"

namespace mt {
namespace {

AttnShape mla_attn_shape(const LayerContext& ctx, int64_t layer, const MicroBatch& mb) {
  const AttentionSpec& a = ctx.layer(layer).attention;
  AttnShape s;
  s.batch = mb.seqs;
  s.seq = mb.seq_len;
  s.n_heads = s.n_kv_heads = a.num_heads;
  s.head_dim = a.head_dim;
  s.v_head_dim = ctx.layer(layer).mla.v_head_dim;
  s.scale = static_cast<float>(a.scale);
  s.seq_lens = mb.all_valid ? nullptr : mb.seq_lens;
  s.segments = mb.segments;
  s.segment_batch = mb.segment_batch;
  return s;
}

// RoPE on x [T, heads·qk_rope_head_dim] (every value rotates), or its transpose on a gradient.
void rope_parts(const LayerContext& ctx, int64_t layer, void* x, int64_t heads, const MicroBatch& mb, bool forward) {
  const int64_t d = ctx.layer(layer).mla.qk_rope_head_dim;
  const RopeTableView& t = ctx.rope[static_cast<size_t>(ctx.layer(layer).attention.rope)];
  if (forward)
    ctx.backend->rope_forward(x, t.cos, t.sin, mb.positions, mb.tokens(), heads, d, d, t.interleaved);
  else
    ctx.backend->rope_backward(x, t.cos, t.sin, mb.positions, mb.tokens(), heads, d, d, t.interleaved);
}

// The latent norms (q_a_layernorm, kv_a_layernorm) over rows of D.
void latent_norm_forward(const LayerContext& ctx, const MlaSpec& m, void* y, const void* x, const void* w, int64_t T,
                         int64_t D) {
  ctx.backend->rmsnorm_forward(y, x, w, T, D, static_cast<float>(m.latent_norm_eps), ctx.spec->norm_weight_offset());
}
void latent_norm_backward(const LayerContext& ctx, const MlaSpec& m, void* dx, real* dw, const void* dy,
                          const void* x, const void* w, int64_t T, int64_t D) {
  ctx.backend->rmsnorm_backward(dx, dw, dy, x, w, T, D, static_cast<float>(m.latent_norm_eps),
                                ctx.spec->norm_weight_offset());
}

}  // namespace

void mla_block_forward(const LayerContext& ctx, int64_t layer, const void* w, const void* in, void* out,
                       const void* residual, const MicroBatch& mb, const LayerScratch& s, const LayerInternals& n) {
  Backend& be = *ctx.backend;
  const MlaSpec& m = ctx.layer(layer).mla;
  const MlaOffsets& o = ctx.offsets(layer).mla;
  const int64_t T = mb.tokens(), H = ctx.spec->hidden_size, heads = m.num_heads;
  const int64_t nope = m.qk_nope_head_dim, rope = m.qk_rope_head_dim, r = m.kv_lora_rank;

  // Query: [T, heads·nope] and [T, heads·rope] from the hidden state or the normed low-rank query.
  const void* q_src = in;
  int64_t q_in = H;
  if (m.q_lora_rank > 0) {
    be.linear_forward(n.q_raw, in, weight_at(ctx, w, o.q_a), weight_at(ctx, w, o.q_a_bias), T, H, m.q_lora_rank);
    latent_norm_forward(ctx, m, n.mla_q_latent, n.q_raw, weight_at(ctx, w, o.q_a_norm), T, m.q_lora_rank);
    q_src = n.mla_q_latent;
    q_in = m.q_lora_rank;
  }
  be.linear_forward(s.mla_q_nope, q_src, weight_at(ctx, w, o.q_nope), nullptr, T, q_in, heads * nope);
  be.linear_forward(s.mla_q_rope, q_src, weight_at(ctx, w, o.q_rope), nullptr, T, q_in, heads * rope);
  rope_parts(ctx, layer, s.mla_q_rope, heads, mb, true);

  // Keys and values: the latent (normed) through kv_b_proj, the shared rotary key.
  be.linear_forward(n.k_raw, in, weight_at(ctx, w, o.kv_latent), weight_at(ctx, w, o.kv_latent_bias), T, H, r);
  be.linear_forward(s.mla_k_rope, in, weight_at(ctx, w, o.kv_rope), weight_at(ctx, w, o.kv_rope_bias), T, H, rope);
  rope_parts(ctx, layer, s.mla_k_rope, 1, mb, true);
  latent_norm_forward(ctx, m, n.mla_kv_latent, n.k_raw, weight_at(ctx, w, o.kv_norm), T, r);
  be.linear_forward(s.mla_k_nope, n.mla_kv_latent, weight_at(ctx, w, o.k_nope), nullptr, T, r, heads * nope);
  be.linear_forward(n.v, n.mla_kv_latent, weight_at(ctx, w, o.v), nullptr, T, r, m.v_dim());

  be.head_concat_forward(n.q, s.mla_q_nope, s.mla_q_rope, T, heads, nope, rope, false);
  be.head_concat_forward(n.k, s.mla_k_nope, s.mla_k_rope, T, heads, nope, rope, true);
  be.attention_forward(n.attn, n.lse, n.q, n.k, n.v, mla_attn_shape(ctx, layer, mb));
  output_projection(ctx, layer, out, n.attn, weight_at(ctx, w, o.o), weight_at(ctx, w, o.o_bias), residual, T, m.v_dim(), H);
}

void mla_block_backward(const LayerContext& ctx, int64_t layer, const void* w, const void* in, const void* d_out,
                        void* d_in, real* dw, const MicroBatch& mb, const LayerScratch& s, const LayerInternals& n) {
  Backend& be = *ctx.backend;
  const MlaSpec& m = ctx.layer(layer).mla;
  const MlaOffsets& o = ctx.offsets(layer).mla;
  const int64_t T = mb.tokens(), H = ctx.spec->hidden_size, heads = m.num_heads;
  const int64_t nope = m.qk_nope_head_dim, rope = m.qk_rope_head_dim, r = m.kv_lora_rank;

  be.linear_backward(s.d_attn, grad_at(dw, o.o), grad_at(dw, o.o_bias), d_out, n.attn, weight_at(ctx, w, o.o), T,
                     m.v_dim(), H, false, ctx.layer(layer).projection_scale());
  be.attention_backward(s.dq, s.dk, s.dv, s.d_attn, n.q, n.k, n.v, n.attn, n.lse, mla_attn_shape(ctx, layer, mb));
  // The parts' gradients replace their forward values in the scratch.
  be.head_concat_backward(s.mla_q_nope, s.mla_q_rope, s.dq, T, heads, nope, rope, false);
  be.head_concat_backward(s.mla_k_nope, s.mla_k_rope, s.dk, T, heads, nope, rope, true);
  rope_parts(ctx, layer, s.mla_q_rope, heads, mb, false);
  rope_parts(ctx, layer, s.mla_k_rope, 1, mb, false);

  // kv_b_proj, the latent's norm, kv_a_proj_with_mqa (d_in written here first).
  be.linear_backward(s.mla_d_kv_latent, grad_at(dw, o.k_nope), nullptr, s.mla_k_nope, n.mla_kv_latent,
                     weight_at(ctx, w, o.k_nope), T, r, heads * nope, false, 1.0f);
  be.linear_backward(s.mla_d_kv_latent, grad_at(dw, o.v), nullptr, s.dv, n.mla_kv_latent, weight_at(ctx, w, o.v), T,
                     r, m.v_dim(), true, 1.0f);
  latent_norm_backward(ctx, m, s.mla_d_kv_raw, grad_at(dw, o.kv_norm), s.mla_d_kv_latent, n.k_raw,
                       weight_at(ctx, w, o.kv_norm), T, r);
  be.linear_backward(d_in, grad_at(dw, o.kv_latent), grad_at(dw, o.kv_latent_bias), s.mla_d_kv_raw, in,
                     weight_at(ctx, w, o.kv_latent), T, H, r, false, 1.0f);
  be.linear_backward(d_in, grad_at(dw, o.kv_rope), grad_at(dw, o.kv_rope_bias), s.mla_k_rope, in,
                     weight_at(ctx, w, o.kv_rope), T, H, rope, true, 1.0f);

  // The query's projections (and its low-rank path).
  if (m.q_lora_rank == 0) {
    be.linear_backward(d_in, grad_at(dw, o.q_nope), nullptr, s.mla_q_nope, in, weight_at(ctx, w, o.q_nope), T, H,
                       heads * nope, true, 1.0f);
    be.linear_backward(d_in, grad_at(dw, o.q_rope), nullptr, s.mla_q_rope, in, weight_at(ctx, w, o.q_rope), T, H,
                       heads * rope, true, 1.0f);
    return;
  }
  const int64_t q_in = m.q_lora_rank;
  be.linear_backward(s.mla_d_q_latent, grad_at(dw, o.q_nope), nullptr, s.mla_q_nope, n.mla_q_latent,
                     weight_at(ctx, w, o.q_nope), T, q_in, heads * nope, false, 1.0f);
  be.linear_backward(s.mla_d_q_latent, grad_at(dw, o.q_rope), nullptr, s.mla_q_rope, n.mla_q_latent,
                     weight_at(ctx, w, o.q_rope), T, q_in, heads * rope, true, 1.0f);
  latent_norm_backward(ctx, m, s.mla_d_q_raw, grad_at(dw, o.q_a_norm), s.mla_d_q_latent, n.q_raw,
                       weight_at(ctx, w, o.q_a_norm), T, q_in);
  be.linear_backward(d_in, grad_at(dw, o.q_a), grad_at(dw, o.q_a_bias), s.mla_d_q_raw, in, weight_at(ctx, w, o.q_a),
                     T, H, q_in, true, 1.0f);
}

}  // namespace mt
