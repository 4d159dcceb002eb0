// The attention block of a decoder layer: q/k/v projections (biases, q/k norm), RoPE by the layer's table (or
// none), softmax attention (GQA, window, soft-cap, ALiBi) and the output projection. Stateless: weights are the
// layer's region, bound per call. Invariant: forward writes the block's internals (q_raw/k_raw where the layer
// has a q/k norm, q, k, v, attn, lse; out_gate and gated_attn with an output gate) and out = o_proj(attn) (residual +
// projection_scale·o_proj(attn) where a residual is given); backward, of out reached by projection_scale·d_out
// (LayerSpec::projection_scale), writes d_in (∂/∂ the block's input),
// ACCUMULATES into the region's fp32 gradient dw and may overwrite q, k (saved internals included).
#pragma once
#include <cstdint>

#include "engine/layer_context.h"
#include "engine/layer_internals.h"
#include "engine/micro_batch.h"

namespace mt {

void attention_block_forward(const LayerContext& ctx, int64_t layer, const void* w, const void* in, void* out,
                             const void* residual, const MicroBatch& mb, const LayerInternals& n);
void attention_block_backward(const LayerContext& ctx, int64_t layer, const void* w, const void* in,
                              const void* d_out, void* d_in, real* dw, const MicroBatch& mb, const LayerScratch& s,
                              const LayerInternals& n);

}  // namespace mt
