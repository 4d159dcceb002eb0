// The two edge layer templates: token embedding (first), and final norm + fused chunked LM head +
// cross-entropy (last). Stateless like the decoder layer; gradients ACCUMULATE into region-shaped buffers.
// Invariant: with tied embeddings the head reads the embedding table and adds its gradient to the table's.
#pragma once
#include <cstdint>

#include "engine/decoder_layer.h"

namespace mt {

void embedding_forward(const LayerContext& ctx, const float* table, float* y, const MicroBatch& mb);
void embedding_backward(const LayerContext& ctx, float* dtable, const float* dy, const MicroBatch& mb);

// Runs the head forward and backward in one pass: returns Σ cross-entropy over the micro-batch's targets,
// writes dx = grad_scale · ∂Σ/∂x, accumulates dhead (head region) and dtable (used only when tied).
double head_forward_backward(const LayerContext& ctx, const float* head, const float* table, const float* x,
                             float* dx, float* dhead, float* dtable, const MicroBatch& mb, float grad_scale,
                             DecoderWorkspace& ws);

}  // namespace mt
