// Lightning attention block forward and backward (see lightning_block.h), following transformers'
// MiniMaxLightningAttention in training (no cache): its qkv after SiLU zeroed on padding, which the op's padded
// tokens (o = 0, no gradient) and the state restarting per sequence make the same for every real token.
#include "engine/lightning_block.h"

namespace mt {

LightningShape lightning_shape(const LightningSpec& l, int64_t batch, int64_t seq) {
  LightningShape s;
  s.batch = batch;
  s.seq = seq;
  s.n_heads = l.num_heads;
  s.head_dim = l.head_dim;
  s.decay_factor = l.decay_factor;
  return s;
}

namespace {

LightningShape op_shape(const LightningSpec& l, const MicroBatch& mb) {
  LightningShape s = lightning_shape(l, mb.seqs, mb.seq_len);
  s.seq_lens = mb.seq_lens;
  s.segments = mb.segments;
  return s;
}

}  // namespace

void lightning_block_forward(const LayerContext& ctx, int64_t layer, const void* w, const void* in, void* out,
                             const void* residual, const MicroBatch& mb, const LayerInternals& n) {
  Backend& be = *ctx.backend;
  const LightningSpec& l = ctx.layer(layer).lightning;
  const LightningOffsets& o = ctx.offsets(layer).lightning;
  const int64_t T = mb.tokens(), H = ctx.spec->hidden_size, W = l.width();
  be.linear_forward(n.lt_qkv, in, weight_at(ctx, w, o.qkv), nullptr, T, H, 3 * W);
  be.lightning_attention_forward(n.attn, n.lt_qkv, op_shape(l, mb));
  be.rmsnorm_forward(n.lt_normed, n.attn, weight_at(ctx, w, o.norm), T, W, static_cast<float>(l.norm_eps), 0.f);
  be.linear_forward(n.out_gate, in, weight_at(ctx, w, o.gate), nullptr, T, H, W);
  be.sigmoid_gate_forward(n.gated_attn, n.lt_normed, n.out_gate, T * W);
  output_projection(ctx, layer, out, n.gated_attn, weight_at(ctx, w, o.out), nullptr, residual, T, W, H);
}

void lightning_block_backward(const LayerContext& ctx, int64_t layer, const void* w, const void* in,
                              const void* d_out, void* d_in, real* dw, const MicroBatch& mb, const LayerScratch& s,
                              const LayerInternals& n) {
  Backend& be = *ctx.backend;
  const LightningSpec& l = ctx.layer(layer).lightning;
  const LightningOffsets& o = ctx.offsets(layer).lightning;
  const int64_t T = mb.tokens(), H = ctx.spec->hidden_size, W = l.width();
  be.linear_backward(s.d_attn, grad_at(dw, o.out), nullptr, d_out, n.gated_attn, weight_at(ctx, w, o.out), T, W, H,
                     false, ctx.layer(layer).projection_scale());
  be.sigmoid_gate_backward(s.d_attn, s.d_out_gate, s.d_attn, n.lt_normed, n.out_gate, T * W);  // d_attn: ∂ normed
  be.rmsnorm_backward(s.lt_d_core, grad_at(dw, o.norm), s.d_attn, n.attn, weight_at(ctx, w, o.norm), T, W,
                      static_cast<float>(l.norm_eps), 0.f);
  be.lightning_attention_backward(s.lt_d_qkv, s.lt_d_core, n.lt_qkv, op_shape(l, mb));
  be.linear_backward(d_in, grad_at(dw, o.qkv), nullptr, s.lt_d_qkv, in, weight_at(ctx, w, o.qkv), T, H, 3 * W, false,
                     1.0f);
  be.linear_backward(d_in, grad_at(dw, o.gate), nullptr, s.d_out_gate, in, weight_at(ctx, w, o.gate), T, H, W, true,
                     1.0f);
}

}  // namespace mt
