// Gated MLP block forward and backward (see mlp_block.h), as transformers' LlamaMLP / GemmaMLP / Phi3MLP compute it.
#include "engine/mlp_block.h"

namespace mt {

void mlp_block_inputs(const LayerContext& ctx, int64_t layer, const void* w, const void* in, const MicroBatch& mb,
                      const LayerScratch& s, const LayerInternals& n) {
  Backend& be = *ctx.backend;
  const MlpSpec& m = ctx.layer(layer).mlp;
  const MlpOffsets& o = ctx.offsets(layer).mlp;
  const int64_t T = mb.tokens(), H = ctx.spec->hidden_size, I = m.intermediate_size;
  be.linear_forward(n.gate, in, weight_at(ctx, w, o.gate), weight_at(ctx, w, o.gate_bias), T, H, I);
  be.linear_forward(n.up, in, weight_at(ctx, w, o.up), weight_at(ctx, w, o.up_bias), T, H, I);
  be.glu_forward(s.act, n.gate, n.up, T * I, m.activation);
}

void mlp_block_activation(const LayerContext& ctx, int64_t layer, const MicroBatch& mb, const LayerScratch& s,
                          const LayerInternals& n) {
  const MlpSpec& m = ctx.layer(layer).mlp;
  ctx.backend->glu_forward(s.act, n.gate, n.up, mb.tokens() * m.intermediate_size, m.activation);
}

void mlp_block_output(const LayerContext& ctx, int64_t layer, const void* w, void* out, const MicroBatch& mb,
                      const LayerScratch& s) {
  const MlpOffsets& o = ctx.offsets(layer).mlp;
  ctx.backend->linear_forward(out, s.act, weight_at(ctx, w, o.down), weight_at(ctx, w, o.down_bias), mb.tokens(),
                              ctx.layer(layer).mlp.intermediate_size, ctx.spec->hidden_size);
}

void mlp_block_backward(const LayerContext& ctx, int64_t layer, const void* w, const void* in, const void* d_out,
                        void* d_in, float* dw, const MicroBatch& mb, const LayerScratch& s, const LayerInternals& n) {
  Backend& be = *ctx.backend;
  const MlpSpec& m = ctx.layer(layer).mlp;
  const MlpOffsets& o = ctx.offsets(layer).mlp;
  const int64_t T = mb.tokens(), H = ctx.spec->hidden_size, I = m.intermediate_size;
  be.linear_backward(s.d_act, grad_at(dw, o.down), grad_at(dw, o.down_bias), d_out, s.act, weight_at(ctx, w, o.down),
                     T, I, H, false);
  be.glu_backward(s.d_gate, s.d_up, s.d_act, n.gate, n.up, T * I, m.activation);
  be.linear_backward(d_in, grad_at(dw, o.gate), grad_at(dw, o.gate_bias), s.d_gate, in, weight_at(ctx, w, o.gate), T,
                     H, I, false);
  be.linear_backward(d_in, grad_at(dw, o.up), grad_at(dw, o.up_bias), s.d_up, in, weight_at(ctx, w, o.up), T, H, I,
                     true);
}

}  // namespace mt
