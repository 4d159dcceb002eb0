// The MLP block of a decoder layer: out = down(act(gate(x)) · up(x)) with optional biases, act SiLU (SwiGLU) or
// tanh-GELU (GeGLU, Gemma), or without a gate (MlpSpec::gated false) down(act(up(x))), b.gate unused. Fused gate_up
// tensors are addressed through the layer's offsets. Every function runs over T tokens (one token chunk of a
// micro-batch; the block is per token) with the chunk's buffers.
// Invariant: projections writes b.gate and b.up, activation b.act from them, inputs all three; output writes
// out = down(act) (residual + projection_scale·down(act) where a residual is given: the layer's residual stream, added
// in the projection's pass); backward, of out reached by projection_scale·d_out (LayerSpec::projection_scale), reads
// b.gate and b.up, writes b.act (the forward's bits, from the activation's backward pass: it needs no
// activation kept), d_in (∂/∂ the block's input), and ACCUMULATES into the region's fp32 gradient dw.
#pragma once
#include <cstdint>

#include "engine/layer_context.h"
#include "engine/layer_internals.h"

namespace mt {

void mlp_block_projections(const LayerContext& ctx, int64_t layer, const void* w, const void* in, int64_t T,
                           const MlpChunk& b);
void mlp_block_activation(const LayerContext& ctx, int64_t layer, int64_t T, const MlpChunk& b);
void mlp_block_inputs(const LayerContext& ctx, int64_t layer, const void* w, const void* in, int64_t T,
                      const MlpChunk& b);
void mlp_block_output(const LayerContext& ctx, int64_t layer, const void* w, void* out, const void* residual, int64_t T,
                      const MlpChunk& b);
void mlp_block_backward(const LayerContext& ctx, int64_t layer, const void* w, const void* in, const void* d_out,
                        void* d_in, real* dw, int64_t T, const MlpChunk& b);

}  // namespace mt
