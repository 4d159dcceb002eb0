// The Gated DeltaNet mixer block of a linear-attention layer (Qwen3.5, Qwen3-Next): in_proj q|k|v, z and b|a, the
// depthwise causal conv1d + SiLU over q|k|v, the gates β = σ(b) and g = −exp(A_log)·softplus(a + dt_bias), the
// gated delta rule (q, k L2-normalised; state zero per sequence and packed example), the RMSNorm gated by silu(z)
// and out_proj. Stateless: weights are the layer's region, bound per call. Invariant: forward writes the block's
// internals (dn_qkv_raw, dn_qkv, dn_z, dn_ba, dn_g, dn_beta, dn_core, dn_normed) and out = out_proj(dn_normed)
// (residual + projection_scale·out_proj(dn_normed) where a residual is given); backward, of out reached by
// projection_scale·d_out (LayerSpec::projection_scale), writes d_in and ACCUMULATES into the region's fp32 gradient dw.
#pragma once
#include <cstdint>

#include "engine/layer_context.h"
#include "engine/layer_internals.h"
#include "engine/micro_batch.h"

namespace mt {

// The delta rule's shape for `batch` sequences of `seq` tokens of a layer's heads (no lengths or segments set).
DeltaRuleShape delta_rule_shape(const DeltaNetSpec& d, int64_t batch, int64_t seq);

void deltanet_block_forward(const LayerContext& ctx, int64_t layer, const void* w, const void* in, void* out,
                            const void* residual, const MicroBatch& mb, const LayerInternals& n);
void deltanet_block_backward(const LayerContext& ctx, int64_t layer, const void* w, const void* in,
                             const void* d_out, void* d_in, real* dw, const MicroBatch& mb, const LayerScratch& s,
                             const LayerInternals& n);

}  // namespace mt
