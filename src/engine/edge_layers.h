// The two edge layer templates: token embedding (first; scaled where the family scales it), and final norm +
// fused chunked LM head + cross-entropy (last; soft-capped or with normalised head rows where the family says).
// Stateless like the decoder layer; gradients ACCUMULATE into region-shaped buffers.
// Invariant: with tied embeddings the head reads the embedding table and adds its gradient to the table's; with a
// normalised head, head_prepare runs before a pass's head calls and head_finish after them.
#pragma once
#include <cstdint>

#include "engine/decoder_layer.h"

namespace mt {

// table, head, x, y, dx, dy in backend.dtype(); dtable, dhead are fp32 region-shaped accumulators. backward may
// overwrite dy; `host_ids` are the micro-batch's input ids in host memory: tokens of the model's padding_idx add
// nothing to dtable (their dy rows are zeroed), as nn.Embedding's padding_idx does.
void embedding_forward(const LayerContext& ctx, const void* table, void* y, const MicroBatch& mb);
void embedding_backward(const LayerContext& ctx, real* dtable, void* dy, const MicroBatch& mb, const int32_t* host_ids);

// A normalised head (ModelSpec::normalized_head): the unit rows into ws.head_weight and a zero gradient for them;
// head_finish adds that gradient, through the normalisation, into dhead. Both do nothing for other heads.
void head_prepare(const LayerContext& ctx, const void* head, DecoderWorkspace& ws);
void head_finish(const LayerContext& ctx, const void* head, real* dhead, DecoderWorkspace& ws);

// Runs the head forward and backward in one pass: returns Σ cross-entropy over the micro-batch's targets,
// writes dx = grad_scale · ∂Σ/∂x, accumulates dhead (head region) and dtable (used only when tied). row_weight
// [tokens] (backend memory; preference training) weighs each token's cross-entropy in the gradient.
double head_forward_backward(const LayerContext& ctx, const void* head, const void* table, const void* x,
                             void* dx, real* dhead, real* dtable, const MicroBatch& mb, float grad_scale,
                             DecoderWorkspace& ws, const real* row_weight = nullptr);

// The head's forward only (evaluation): Σ cross-entropy over the micro-batch's targets; no gradient anywhere.
// row_loss [tokens] (backend memory), where given, receives each token's cross-entropy (0 where not a target).
double head_loss_only(const LayerContext& ctx, const void* head, const void* table, const void* x,
                      const MicroBatch& mb, DecoderWorkspace& ws, real* row_loss = nullptr);

}  // namespace mt
