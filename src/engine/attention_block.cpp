// Attention block forward and backward (see attention_block.h), following transformers' attention modules:
// Llama's (q/k/v bias: Qwen2; per-head q/k RMSNorm before RoPE: Qwen3, Gemma 3), with the family's scale,
// soft-cap (Gemma 2), sliding window, partial or interleaved RoPE (Phi-3, GLM-4), NoPE and ALiBi (Baichuan 2), and
// Qwen3.5's / Qwen3-Next's sigmoid output gate (attn·σ(gate) before o_proj, the gate rows from q_proj) and
// GPT-OSS's attention sinks (a per-head logit in the softmax denominator; its gradient from dout·out and lse).
#include "engine/attention_block.h"

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
  s.seq_lens = mb.seq_lens;
  s.segments = mb.segments;
  s.sinks = weight_at(ctx, w, ctx.offsets(layer).attention.sinks);
  return s;
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
                             const MicroBatch& mb, const LayerInternals& n) {
  Backend& be = *ctx.backend;
  const AttentionSpec& a = ctx.layer(layer).attention;
  const AttentionOffsets& o = ctx.offsets(layer).attention;
  const int64_t T = mb.tokens(), H = ctx.spec->hidden_size;
  const auto eps = static_cast<float>(ctx.spec->rms_norm_eps);
  const float offset = ctx.spec->norm_weight_offset();

  void* q_lin = a.qk_norm ? n.q_raw : n.q;
  void* k_lin = a.qk_norm ? n.k_raw : n.k;
  be.linear_forward(q_lin, in, weight_at(ctx, w, o.q), weight_at(ctx, w, o.q_bias), T, H, a.q_dim());
  be.linear_forward(k_lin, in, weight_at(ctx, w, o.k), weight_at(ctx, w, o.k_bias), T, H, a.kv_dim());
  be.linear_forward(n.v, in, weight_at(ctx, w, o.v), weight_at(ctx, w, o.v_bias), T, H, a.kv_dim());
  if (a.qk_norm) {
    be.rmsnorm_forward(n.q, n.q_raw, weight_at(ctx, w, o.q_norm), T * a.num_heads, a.head_dim, eps, offset);
    be.rmsnorm_forward(n.k, n.k_raw, weight_at(ctx, w, o.k_norm), T * a.num_kv_heads, a.head_dim, eps, offset);
  }
  rope(ctx, a, n.q, a.num_heads, mb, true);
  rope(ctx, a, n.k, a.num_kv_heads, mb, true);
  be.attention_forward(n.attn, n.lse, n.q, n.k, n.v, attn_shape(ctx, layer, w, mb));
  const void* o_in = n.attn;
  if (a.output_gate) {
    be.linear_forward(n.out_gate, in, weight_at(ctx, w, o.out_gate), weight_at(ctx, w, o.out_gate_bias), T, H,
                      a.q_dim());
    be.sigmoid_gate_forward(n.gated_attn, n.attn, n.out_gate, T * a.q_dim());
    o_in = n.gated_attn;
  }
  be.linear_forward(out, o_in, weight_at(ctx, w, o.o), weight_at(ctx, w, o.o_bias), T, a.q_dim(), H);
}

void attention_block_backward(const LayerContext& ctx, int64_t layer, const void* w, const void* in,
                              const void* d_out, void* d_in, float* dw, const MicroBatch& mb, const LayerScratch& s,
                              const LayerInternals& n) {
  Backend& be = *ctx.backend;
  const AttentionSpec& a = ctx.layer(layer).attention;
  const AttentionOffsets& o = ctx.offsets(layer).attention;
  const int64_t T = mb.tokens(), H = ctx.spec->hidden_size;
  const auto eps = static_cast<float>(ctx.spec->rms_norm_eps);
  const float offset = ctx.spec->norm_weight_offset();

  be.linear_backward(s.d_attn, grad_at(dw, o.o), grad_at(dw, o.o_bias), d_out, a.output_gate ? n.gated_attn : n.attn,
                     weight_at(ctx, w, o.o), T, a.q_dim(), H, false);
  if (a.output_gate) be.sigmoid_gate_backward(s.d_attn, s.d_out_gate, s.d_attn, n.attn, n.out_gate, T * a.q_dim());
  const AttnShape shape = attn_shape(ctx, layer, w, mb);
  be.attention_backward(s.dq, s.dk, s.dv, s.d_attn, n.q, n.k, n.v, n.attn, n.lse, shape);
  if (a.sinks) be.attention_sinks_backward(grad_at(dw, o.sinks), s.d_attn, n.attn, n.lse, shape);
  rope(ctx, a, s.dq, a.num_heads, mb, false);
  rope(ctx, a, s.dk, a.num_kv_heads, mb, false);
  void* dq_lin = s.dq;
  void* dk_lin = s.dk;
  if (a.qk_norm) {
    // The q/k projections' gradients land in q/k, which nothing reads after this (saved internals included).
    be.rmsnorm_backward(n.q, grad_at(dw, o.q_norm), s.dq, n.q_raw, weight_at(ctx, w, o.q_norm), T * a.num_heads,
                        a.head_dim, eps, offset);
    be.rmsnorm_backward(n.k, grad_at(dw, o.k_norm), s.dk, n.k_raw, weight_at(ctx, w, o.k_norm), T * a.num_kv_heads,
                        a.head_dim, eps, offset);
    dq_lin = n.q;
    dk_lin = n.k;
  }
  be.linear_backward(d_in, grad_at(dw, o.q), grad_at(dw, o.q_bias), dq_lin, in, weight_at(ctx, w, o.q), T, H,
                     a.q_dim(), false);
  be.linear_backward(d_in, grad_at(dw, o.k), grad_at(dw, o.k_bias), dk_lin, in, weight_at(ctx, w, o.k), T, H,
                     a.kv_dim(), true);
  be.linear_backward(d_in, grad_at(dw, o.v), grad_at(dw, o.v_bias), s.dv, in, weight_at(ctx, w, o.v), T, H,
                     a.kv_dim(), true);
  if (a.output_gate)
    be.linear_backward(d_in, grad_at(dw, o.out_gate), grad_at(dw, o.out_gate_bias), s.d_out_gate, in,
                       weight_at(ctx, w, o.out_gate), T, H, a.q_dim(), true);
}

}  // namespace mt
