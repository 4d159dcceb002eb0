// MLP block forward and backward (see mlp_block.h), as transformers' LlamaMLP / GemmaMLP / Phi3MLP compute it, or
// without a gate as Starcoder2MLP does (c_fc → act → c_proj: the up projection's output goes through act alone).
#include "engine/mlp_block.h"

namespace mt {

void mlp_block_projections(const LayerContext& ctx, int64_t layer, const void* w, const void* in, int64_t T,
                           const MlpChunk& b) {
  Backend& be = *ctx.backend;
  const MlpOffsets& o = ctx.offsets(layer).mlp;
  const int64_t H = ctx.spec->hidden_size, I = ctx.layer(layer).mlp.intermediate_size;
  if (ctx.layer(layer).mlp.gated)
    be.linear_forward(b.gate, in, weight_at(ctx, w, o.gate), weight_at(ctx, w, o.gate_bias), T, H, I);
  be.linear_forward(b.up, in, weight_at(ctx, w, o.up), weight_at(ctx, w, o.up_bias), T, H, I);
}

void mlp_block_inputs(const LayerContext& ctx, int64_t layer, const void* w, const void* in, int64_t T,
                      const MlpChunk& b) {
  mlp_block_projections(ctx, layer, w, in, T, b);
  mlp_block_activation(ctx, layer, T, b);
}

void mlp_block_activation(const LayerContext& ctx, int64_t layer, int64_t T, const MlpChunk& b) {
  const MlpSpec& m = ctx.layer(layer).mlp;
  if (m.gated)
    ctx.backend->glu_forward(b.act, b.gate, b.up, T, m.intermediate_size, m.intermediate_size, m.activation);
  else
    ctx.backend->glu_forward(b.act, b.up, nullptr, T, m.intermediate_size, m.intermediate_size, m.activation);
}

void mlp_block_output(const LayerContext& ctx, int64_t layer, const void* w, void* out, const void* residual, int64_t T,
                      const MlpChunk& b) {
  const MlpOffsets& o = ctx.offsets(layer).mlp;
  output_projection(ctx, layer, out, b.act, weight_at(ctx, w, o.down), weight_at(ctx, w, o.down_bias), residual, T,
                    ctx.layer(layer).mlp.intermediate_size, ctx.spec->hidden_size);
}

void mlp_block_backward(const LayerContext& ctx, int64_t layer, const void* w, const void* in, const void* d_out,
                        void* d_in, real* dw, int64_t T, const MlpChunk& b) {
  Backend& be = *ctx.backend;
  const MlpSpec& m = ctx.layer(layer).mlp;
  const MlpOffsets& o = ctx.offsets(layer).mlp;
  const int64_t H = ctx.spec->hidden_size, I = m.intermediate_size;
  const void* w_down = weight_at(ctx, w, o.down);
  const float d_out_scale = ctx.layer(layer).projection_scale();
  be.linear_backward(b.d_act, nullptr, nullptr, d_out, nullptr, w_down, T, I, H, false, d_out_scale);
  // The activation's backward also writes act, for down's dw.
  if (m.gated)
    be.glu_backward(b.d_gate, b.d_up, b.act, b.d_act, b.gate, b.up, T, I, I, m.activation);
  else
    be.glu_backward(b.d_up, nullptr, b.act, b.d_act, b.up, nullptr, T, I, I, m.activation);
  be.linear_backward(nullptr, grad_at(dw, o.down), grad_at(dw, o.down_bias), d_out, b.act, w_down, T, I, H, false,
                     d_out_scale);
  if (m.gated)
    be.linear_backward(d_in, grad_at(dw, o.gate), grad_at(dw, o.gate_bias), b.d_gate, in, weight_at(ctx, w, o.gate),
                       T, H, I, false, 1.0f);
  be.linear_backward(d_in, grad_at(dw, o.up), grad_at(dw, o.up_bias), b.d_up, in, weight_at(ctx, w, o.up), T, H, I,
                     m.gated, 1.0f);
}

}  // namespace mt
