// The two edge layer templates: token embedding (first), and final norm + fused chunked LM head +
// cross-entropy (last). Stateless like the decoder layer; gradients ACCUMULATE into region-shaped buffers.
// Invariant: with tied embeddings the head reads the embedding table and adds its gradient to the table's.
#pragma once
#include <cstdint>

#include "engine/decoder_layer.h"

namespace mt {

// table, head, x, y, dx, dy in backend.dtype(); dtable, dhead are fp32 region-shaped accumulators.
void embedding_forward(const LayerContext& ctx, const void* table, void* y, const MicroBatch& mb);
void embedding_backward(const LayerContext& ctx, float* dtable, const void* dy, const MicroBatch& mb);

// Runs the head forward and backward in one pass: returns Σ cross-entropy over the micro-batch's targets,
// writes dx = grad_scale · ∂Σ/∂x, accumulates dhead (head region) and dtable (used only when tied).
double head_forward_backward(const LayerContext& ctx, const void* head, const void* table, const void* x,
                             void* dx, float* dhead, float* dtable, const MicroBatch& mb, float grad_scale,
                             DecoderWorkspace& ws);

}  // namespace mt
