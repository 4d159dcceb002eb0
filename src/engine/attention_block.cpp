// Attention block forward and backward (see attention_block.h), following transformers' attention modules:
// Llama's (q/k/v bias: Qwen2; per-head q/k RMSNorm before RoPE: Qwen3, Gemma 3; after it: Hunyuan; over the whole
// projection: OLMo 2; per-head q/k LayerNorm with a weight per head: Cohere), with the family's scale,
// soft-cap (Gemma 2), sliding window, partial or interleaved RoPE (Phi-3, GLM-4), NoPE and ALiBi (Baichuan 2), and
// Qwen3.5's / Qwen3-Next's sigmoid output gate (attn·σ(gate) before o_proj, the gate rows from q_proj), Llama 4's
// chunked attention, weightless q/k L2 norm and NoPE layers' attention temperature (q scaled after RoPE), and
// GPT-OSS's attention sinks (a per-head logit in the softmax denominator; its gradient from dout·out and lse).
#include "engine/attention_block.h"

#include <algorithm>

namespace mt {
namespace {

AttnShape attn_shape(const LayerContext& ctx, int64_t layer, const void* w, const MicroBatch& mb) {
  const AttentionSpec& a = ctx.layer(layer).attention;
  AttnShape s;
  s.batch = mb.seqs;
  s.seq = mb.seq_len;
  s.n_heads = a.num_heads;
  s.n_kv_heads = a.num_kv_heads;
  s.head_dim = a.head_dim;
  s.window = a.window;
  s.scale = static_cast<float>(a.scale);
  s.softcap = static_cast<float>(a.softcap);
  s.alibi_slopes = ctx.alibi_slopes.empty() ? nullptr : ctx.alibi_slopes[static_cast<size_t>(layer)];
  s.seq_lens = mb.all_valid ? nullptr : mb.seq_lens;
  s.segments = mb.segments;
  s.segment_batch = mb.segment_batch;
  if (a.chunk > 0 && mb.chunk_segments != nullptr) {  // chunked_attention.h
    s.segments = mb.chunk_segments;
    s.segment_batch = mb.chunk_segment_batch;
    s.window = a.window > 0 ? std::min(a.window, a.chunk) : a.chunk;
  }
  s.sinks = weight_at(ctx, w, ctx.offsets(layer).attention.sinks);
  return s;
}

// Llama 4's attention temperature on q (or, backward, on dq: the scaling is diagonal).
void temperature(const LayerContext& ctx, const AttentionSpec& a, void* q, const MicroBatch& mb) {
  if (a.temperature_floor_scale <= 0.0) return;
  ctx.backend->attention_temperature(q, mb.tokens(), mb.seq_len, a.q_dim(), static_cast<float>(a.temperature_floor_scale),
                                     static_cast<float>(a.temperature_attn_scale));
}

// The q/k norm, over each head or over the whole projection (qk_norm_whole): RMSNorm with its weight (qk_norm) or
// without (qk_l2_norm), or LayerNorm with a weight per head (qk_layer_norm, `heads` weight rows); forward q, k =
// norm(q_raw, k_raw); backward dq_raw, dk_raw = ∂norm(q_raw, k_raw)ᵀ·(dq, dk), written over dq_raw / dk_raw.
void norm_rows_forward(const LayerContext& ctx, const AttentionSpec& a, const void* w, void* y, const void* x,
                       int64_t elements, int64_t width, int64_t heads) {
  const auto eps = static_cast<float>(ctx.spec->rms_norm_eps);
  if (a.qk_layer_norm)
    ctx.backend->layernorm_forward(y, x, w, nullptr, elements / width, width, heads, eps);
  else if (a.qk_l2_norm)
    ctx.backend->rms_normalize_forward(y, x, elements / width, width, eps);
  else
    rmsnorm_forward(ctx, y, x, w, elements / width, width);
}
void norm_rows_backward(const LayerContext& ctx, const AttentionSpec& a, const void* w, real* dw, void* dx,
                        const void* dy, const void* x, int64_t elements, int64_t width, int64_t heads) {
  const auto eps = static_cast<float>(ctx.spec->rms_norm_eps);
  if (a.qk_layer_norm)
    ctx.backend->layernorm_backward(dx, dw, nullptr, dy, x, w, nullptr, elements / width, width, heads, eps);
  else if (a.qk_l2_norm)
    ctx.backend->rms_normalize_backward(dx, dy, x, elements / width, width, eps);
  else
    ctx.backend->rmsnorm_backward(dx, dw, dy, x, w, elements / width, width, eps, ctx.spec->norm_weight_offset());
}
void qk_norm_forward(const LayerContext& ctx, const AttentionSpec& a, const void* w, const AttentionOffsets& o,
                     const LayerInternals& n, int64_t T) {
  norm_rows_forward(ctx, a, weight_at(ctx, w, o.q_norm), n.q, n.q_raw, T * a.q_dim(), a.q_norm_width(), a.num_heads);
  norm_rows_forward(ctx, a, weight_at(ctx, w, o.k_norm), n.k, n.k_raw, T * a.kv_dim(), a.k_norm_width(),
                    a.num_kv_heads);
}
void qk_norm_backward(const LayerContext& ctx, const AttentionSpec& a, const void* w, real* dw,
                      const AttentionOffsets& o, void* dq_raw, void* dk_raw, const void* dq, const void* dk,
                      const LayerInternals& n, int64_t T) {
  norm_rows_backward(ctx, a, weight_at(ctx, w, o.q_norm), grad_at(dw, o.q_norm), dq_raw, dq, n.q_raw, T * a.q_dim(),
                     a.q_norm_width(), a.num_heads);
  norm_rows_backward(ctx, a, weight_at(ctx, w, o.k_norm), grad_at(dw, o.k_norm), dk_raw, dk, n.k_raw,
                     T * a.kv_dim(), a.k_norm_width(), a.num_kv_heads);
}

void rope(const LayerContext& ctx, const AttentionSpec& a, void* x, int64_t heads, const MicroBatch& mb, bool forward) {
  if (a.rope < 0) return;
  const RopeTableView& t = ctx.rope[static_cast<size_t>(a.rope)];
  if (forward)
    ctx.backend->rope_forward(x, t.cos, t.sin, mb.positions, mb.tokens(), heads, a.head_dim, t.rot_dim, t.interleaved);
  else
    ctx.backend->rope_backward(x, t.cos, t.sin, mb.positions, mb.tokens(), heads, a.head_dim, t.rot_dim, t.interleaved);
}

}  // namespace

void attention_block_forward(const LayerContext& ctx, int64_t layer, const void* w, const void* in, void* out,
                             const void* residual, const MicroBatch& mb, const LayerInternals& n) {
  Backend& be = *ctx.backend;
  const AttentionSpec& a = ctx.layer(layer).attention;
  const AttentionOffsets& o = ctx.offsets(layer).attention;
  const int64_t T = mb.tokens(), H = ctx.spec->hidden_size;

  void* q_lin = a.normed_qk() ? n.q_raw : n.q;
  void* k_lin = a.normed_qk() ? n.k_raw : n.k;
  be.linear_forward(q_lin, in, weight_at(ctx, w, o.q), weight_at(ctx, w, o.q_bias), T, H, a.q_dim());
  be.linear_forward(k_lin, in, weight_at(ctx, w, o.k), weight_at(ctx, w, o.k_bias), T, H, a.kv_dim());
  be.linear_forward(n.v, in, weight_at(ctx, w, o.v), weight_at(ctx, w, o.v_bias), T, H, a.kv_dim());
  const bool norm_after_rope = a.normed_qk() && a.qk_norm_after_rope;
  if (a.normed_qk() && !norm_after_rope) qk_norm_forward(ctx, a, w, o, n, T);
  rope(ctx, a, norm_after_rope ? n.q_raw : n.q, a.num_heads, mb, true);
  rope(ctx, a, norm_after_rope ? n.k_raw : n.k, a.num_kv_heads, mb, true);
  if (norm_after_rope) qk_norm_forward(ctx, a, w, o, n, T);
  temperature(ctx, a, n.q, mb);
  be.attention_forward(n.attn, n.lse, n.q, n.k, n.v, attn_shape(ctx, layer, w, mb));
  const void* o_in = n.attn;
  if (a.output_gate) {
    be.linear_forward(n.out_gate, in, weight_at(ctx, w, o.out_gate), weight_at(ctx, w, o.out_gate_bias), T, H,
                      a.q_dim());
    be.sigmoid_gate_forward(n.gated_attn, n.attn, n.out_gate, T * a.q_dim());
    o_in = n.gated_attn;
  }
  output_projection(ctx, layer, out, o_in, weight_at(ctx, w, o.o), weight_at(ctx, w, o.o_bias), residual, T, a.q_dim(), H);
}

void attention_block_backward(const LayerContext& ctx, int64_t layer, const void* w, const void* in,
                              const void* d_out, void* d_in, real* dw, const MicroBatch& mb, const LayerScratch& s,
                              const LayerInternals& n) {
  Backend& be = *ctx.backend;
  const AttentionSpec& a = ctx.layer(layer).attention;
  const AttentionOffsets& o = ctx.offsets(layer).attention;
  const int64_t T = mb.tokens(), H = ctx.spec->hidden_size;

  be.linear_backward(s.d_attn, grad_at(dw, o.o), grad_at(dw, o.o_bias), d_out, a.output_gate ? n.gated_attn : n.attn,
                     weight_at(ctx, w, o.o), T, a.q_dim(), H, false, ctx.layer(layer).projection_scale());
  if (a.output_gate) be.sigmoid_gate_backward(s.d_attn, s.d_out_gate, s.d_attn, n.attn, n.out_gate, T * a.q_dim());
  const AttnShape shape = attn_shape(ctx, layer, w, mb);
  be.attention_backward(s.dq, s.dk, s.dv, s.d_attn, n.q, n.k, n.v, n.attn, n.lse, shape);
  if (a.sinks) be.attention_sinks_backward(grad_at(dw, o.sinks), s.d_attn, n.attn, n.lse, shape);
  temperature(ctx, a, s.dq, mb);
  // With a q/k norm the projections' gradients land in q/k, which nothing reads after this (saved internals
  // included); the norm's backward reads q_raw/k_raw, rotated where the norm follows RoPE.
  void* dq_lin = a.normed_qk() ? n.q : s.dq;
  void* dk_lin = a.normed_qk() ? n.k : s.dk;
  const bool norm_after_rope = a.normed_qk() && a.qk_norm_after_rope;
  if (norm_after_rope) qk_norm_backward(ctx, a, w, dw, o, dq_lin, dk_lin, s.dq, s.dk, n, T);
  rope(ctx, a, norm_after_rope ? dq_lin : s.dq, a.num_heads, mb, false);
  rope(ctx, a, norm_after_rope ? dk_lin : s.dk, a.num_kv_heads, mb, false);
  if (a.normed_qk() && !norm_after_rope) qk_norm_backward(ctx, a, w, dw, o, dq_lin, dk_lin, s.dq, s.dk, n, T);
  be.linear_backward(d_in, grad_at(dw, o.q), grad_at(dw, o.q_bias), dq_lin, in, weight_at(ctx, w, o.q), T, H,
                     a.q_dim(), false, 1.0f);
  be.linear_backward(d_in, grad_at(dw, o.k), grad_at(dw, o.k_bias), dk_lin, in, weight_at(ctx, w, o.k), T, H,
                     a.kv_dim(), true, 1.0f);
  be.linear_backward(d_in, grad_at(dw, o.v), grad_at(dw, o.v_bias), s.dv, in, weight_at(ctx, w, o.v), T, H,
                     a.kv_dim(), true, 1.0f);
  if (a.output_gate)
    be.linear_backward(d_in, grad_at(dw, o.out_gate), grad_at(dw, o.out_gate_bias), s.d_out_gate, in,
                       weight_at(ctx, w, o.out_gate), T, H, a.q_dim(), true, 1.0f);
}

}  // namespace mt
