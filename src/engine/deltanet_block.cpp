// Gated DeltaNet block forward and backward (see deltanet_block.h), following transformers' Qwen3_5GatedDeltaNet
// (and Qwen3NextGatedDeltaNet, whose fused projections the param layout stores in the same q|k|v|z and b|a order).
#include "engine/deltanet_block.h"

namespace mt {

DeltaRuleShape delta_rule_shape(const DeltaNetSpec& d, int64_t batch, int64_t seq) {
  DeltaRuleShape s;
  s.batch = batch;
  s.seq = seq;
  s.n_k_heads = d.num_k_heads;
  s.n_v_heads = d.num_v_heads;
  s.k_head_dim = d.k_head_dim;
  s.v_head_dim = d.v_head_dim;
  return s;
}

namespace {

DeltaRuleShape rule_shape(const DeltaNetSpec& d, const MicroBatch& mb) {
  DeltaRuleShape s = delta_rule_shape(d, mb.seqs, mb.seq_len);
  s.seq_lens = mb.seq_lens;
  s.segments = mb.segments;
  return s;
}

}  // namespace

void deltanet_block_forward(const LayerContext& ctx, int64_t layer, const void* w, const void* in, void* out,
                            const void* residual, const MicroBatch& mb, const LayerInternals& n) {
  Backend& be = *ctx.backend;
  const DeltaNetSpec& d = ctx.layer(layer).deltanet;
  const DeltaNetOffsets& o = ctx.offsets(layer).deltanet;
  const int64_t T = mb.tokens(), H = ctx.spec->hidden_size, nv = d.num_v_heads;
  be.linear_forward(n.dn_qkv_raw, in, weight_at(ctx, w, o.qkv), nullptr, T, H, d.conv_dim());
  be.linear_forward(n.dn_z, in, weight_at(ctx, w, o.z), nullptr, T, H, d.value_dim());
  be.linear_forward(n.dn_ba, in, weight_at(ctx, w, o.ba), nullptr, T, H, 2 * nv);
  be.causal_conv1d_forward(n.dn_qkv, n.dn_qkv_raw, weight_at(ctx, w, o.conv), mb.seqs, mb.seq_len, d.conv_dim(),
                           d.conv_kernel, mb.segments);
  be.deltanet_gates_forward(n.dn_g, n.dn_beta, n.dn_ba, weight_at(ctx, w, o.a_log), weight_at(ctx, w, o.dt_bias), T,
                            nv);
  be.gated_delta_rule_forward(n.dn_core, n.dn_qkv, n.dn_g, n.dn_beta, rule_shape(d, mb));
  be.gated_rmsnorm_forward(n.dn_normed, n.dn_core, n.dn_z, weight_at(ctx, w, o.norm), T * nv, d.v_head_dim,
                           static_cast<float>(ctx.spec->rms_norm_eps));
  output_projection(ctx, layer, out, n.dn_normed, weight_at(ctx, w, o.out), nullptr, residual, T, d.value_dim(), H);
}

void deltanet_block_backward(const LayerContext& ctx, int64_t layer, const void* w, const void* in,
                             const void* d_out, void* d_in, real* dw, const MicroBatch& mb, const LayerScratch& s,
                             const LayerInternals& n) {
  Backend& be = *ctx.backend;
  const DeltaNetSpec& d = ctx.layer(layer).deltanet;
  const DeltaNetOffsets& o = ctx.offsets(layer).deltanet;
  const int64_t T = mb.tokens(), H = ctx.spec->hidden_size, nv = d.num_v_heads;
  be.linear_backward(s.dn_d_normed, grad_at(dw, o.out), nullptr, d_out, n.dn_normed, weight_at(ctx, w, o.out), T,
                     d.value_dim(), H, false, ctx.layer(layer).projection_scale());
  be.gated_rmsnorm_backward(s.dn_d_core, s.dn_d_z, grad_at(dw, o.norm), s.dn_d_normed, n.dn_core, n.dn_z,
                            weight_at(ctx, w, o.norm), T * nv, d.v_head_dim, static_cast<float>(ctx.spec->rms_norm_eps));
  be.gated_delta_rule_backward(s.dn_d_qkv, s.dn_dg, s.dn_dbeta, s.dn_d_core, n.dn_qkv, n.dn_g, n.dn_beta,
                               rule_shape(d, mb));
  be.deltanet_gates_backward(s.dn_d_ba, grad_at(dw, o.a_log), grad_at(dw, o.dt_bias), s.dn_dg, s.dn_dbeta, n.dn_ba,
                             weight_at(ctx, w, o.a_log), weight_at(ctx, w, o.dt_bias), T, nv);
  be.causal_conv1d_backward(s.dn_d_qkv_raw, grad_at(dw, o.conv), s.dn_d_qkv, n.dn_qkv_raw, weight_at(ctx, w, o.conv),
                            mb.seqs, mb.seq_len, d.conv_dim(), d.conv_kernel, mb.segments);
  be.linear_backward(d_in, grad_at(dw, o.qkv), nullptr, s.dn_d_qkv_raw, in, weight_at(ctx, w, o.qkv), T, H,
                     d.conv_dim(), false, 1.0f);
  be.linear_backward(d_in, grad_at(dw, o.z), nullptr, s.dn_d_z, in, weight_at(ctx, w, o.z), T, H, d.value_dim(), true, 1.0f);
  be.linear_backward(d_in, grad_at(dw, o.ba), nullptr, s.dn_d_ba, in, weight_at(ctx, w, o.ba), T, H, 2 * nv, true, 1.0f);
}

}  // namespace mt
