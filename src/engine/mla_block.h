// The multi-head latent attention block of a decoder layer (DeepSeek-V2/V3, Kimi K2, GLM-4.7-Flash; MlaSpec):
// the query (q_proj, or q_a_proj → RMSNorm → q_b_proj) split per head into its no-rope and rope parts, the latent
// and the shared rotary key from kv_a_proj_with_mqa, the latent's RMSNorm, kv_b_proj's per-head no-rope keys and
// values, RoPE on the rope parts, each head's query and key joined as [nope | rope], softmax attention with the q/k
// head dim different from the value's, and o_proj. Stateless: weights are the layer's region, bound per call.
// Invariant: forward writes the block's internals (q_raw and mla_q_latent with a low-rank query, k_raw and
// mla_kv_latent, q, k, v, attn, lse) and out = o_proj(attn) (residual + projection_scale·o_proj(attn) where a
// residual is given), using the scratch's mla parts as its own; backward, of out reached by projection_scale·d_out
// (LayerSpec::projection_scale), writes d_in and ACCUMULATES into the region's fp32 gradient dw.
#pragma once
#include <cstdint>

#include "engine/layer_context.h"
#include "engine/layer_internals.h"
#include "engine/micro_batch.h"

namespace mt {

void mla_block_forward(const LayerContext& ctx, int64_t layer, const void* w, const void* in, void* out,
                       const void* residual, const MicroBatch& mb, const LayerScratch& s, const LayerInternals& n);
void mla_block_backward(const LayerContext& ctx, int64_t layer, const void* w, const void* in, const void* d_out,
                        void* d_in, real* dw, const MicroBatch& mb, const LayerScratch& s, const LayerInternals& n);

}  // namespace mt
