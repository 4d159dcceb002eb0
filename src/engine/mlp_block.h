// The gated MLP block of a decoder layer: out = down(act(gate(x)) · up(x)) with optional biases, act SiLU
// (SwiGLU) or tanh-GELU (GeGLU, Gemma). Fused gate_up tensors are addressed through the layer's offsets.
// Invariant: inputs writes gate, up (internals) and act (scratch); output writes out = down(act); backward
// writes d_in (∂/∂ the block's input) and ACCUMULATES into the region's fp32 gradient dw.
#pragma once
#include <cstdint>

#include "engine/layer_context.h"
#include "engine/layer_internals.h"
#include "engine/micro_batch.h"

namespace mt {

void mlp_block_inputs(const LayerContext& ctx, int64_t layer, const void* w, const void* in, const MicroBatch& mb,
                      const LayerScratch& s, const LayerInternals& n);
void mlp_block_output(const LayerContext& ctx, int64_t layer, const void* w, void* out, const MicroBatch& mb,
                      const LayerScratch& s);
// act from the saved gate and up (the cheap part of inputs).
void mlp_block_activation(const LayerContext& ctx, int64_t layer, const MicroBatch& mb, const LayerScratch& s,
                          const LayerInternals& n);
void mlp_block_backward(const LayerContext& ctx, int64_t layer, const void* w, const void* in, const void* d_out,
                        void* d_in, float* dw, const MicroBatch& mb, const LayerScratch& s, const LayerInternals& n);

}  // namespace mt
