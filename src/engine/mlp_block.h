// The gated MLP block of a decoder layer: out = down(act(gate(x)) · up(x)) with optional biases, act SiLU
// (SwiGLU) or tanh-GELU (GeGLU, Gemma). Fused gate_up tensors are addressed through the layer's offsets. Every
// function runs over T tokens (one token chunk of a micro-batch; the block is per token) with the chunk's buffers.
// Invariant: inputs writes b.gate, b.up and b.act; output writes out = down(act); backward writes d_in (∂/∂ the
// block's input) and ACCUMULATES into the region's fp32 gradient dw.
#pragma once
#include <cstdint>

#include "engine/layer_context.h"
#include "engine/layer_internals.h"

namespace mt {

void mlp_block_inputs(const LayerContext& ctx, int64_t layer, const void* w, const void* in, int64_t T,
                      const MlpChunk& b);
void mlp_block_output(const LayerContext& ctx, int64_t layer, const void* w, void* out, int64_t T, const MlpChunk& b);
// act from gate and up (the cheap part of inputs).
void mlp_block_activation(const LayerContext& ctx, int64_t layer, int64_t T, const MlpChunk& b);
void mlp_block_backward(const LayerContext& ctx, int64_t layer, const void* w, const void* in, const void* d_out,
                        void* d_in, float* dw, int64_t T, const MlpChunk& b);

}  // namespace mt
