// The lightning-attention mixer block of MiniMax's linear-attention layers (MiniMaxLightningAttention): qkv_proj,
// the decayed linear attention over silu(q), silu(k), silu(v) per head (the state zero per sequence and packed
// example), RMSNorm over the heads' whole width, × sigmoid(output_gate(x)), out_proj. Stateless: weights are the
// layer's region, bound per call. Invariant: forward writes the block's internals (lt_qkv, attn, lt_normed, out_gate,
// gated_attn) and out = out_proj(gated_attn) (residual + projection_scale·out_proj(gated_attn) where a residual is
// given); backward, of out reached by projection_scale·d_out (LayerSpec::projection_scale), writes d_in and
// ACCUMULATES into the region's fp32 gradient dw.
#pragma once
#include <cstdint>

#include "engine/layer_context.h"
#include "engine/layer_internals.h"
#include "engine/micro_batch.h"

namespace mt {

// The op's shape for `batch` sequences of `seq` tokens of a layer's heads (no lengths or segments set).
LightningShape lightning_shape(const LightningSpec& l, int64_t batch, int64_t seq);

void lightning_block_forward(const LayerContext& ctx, int64_t layer, const void* w, const void* in, void* out,
                             const void* residual, const MicroBatch& mb, const LayerInternals& n);
void lightning_block_backward(const LayerContext& ctx, int64_t layer, const void* w, const void* in,
                              const void* d_out, void* d_in, real* dw, const MicroBatch& mb, const LayerScratch& s,
                              const LayerInternals& n);

}  // namespace mt
