// The decoder layer template: norm → attention block → (post-norm) → (× residual multiplier) → residual → norm → MLP
// block → (post-norm) → (× residual multiplier) → residual, each block chosen and sized by the layer's spec (the
// pre-norms absent where the layer has only post-block norms). Stateless: weights are bound per call. Backward
// either recomputes the layer's internals from its input (only layer inputs need keeping) or reads the internals
// its forward saved, recomputing only the cheap elementwise ones (norm1, norm2, act); both give bitwise the same
// gradients. A dense layer's feed-forward half (MLP, its post-norm) runs in token chunks of the workspace's
// chunk_tokens, in token order; one chunk is the unchunked computation exactly. A mixture-of-experts layer's block
// is not chunked: it runs whole over the micro-batch and in backward recomputes itself from its input, or where
// the layer keeps its expert activations (MoeKept) reads them.
// Invariant: backward(x, dy) writes dx and ACCUMULATES into dweights (the region's fp32 gradient).
#pragma once
#include <cstdint>
#include <vector>

#include "engine/layer_context.h"
#include "engine/layer_internals.h"
#include "engine/micro_batch.h"
#include "engine/moe_block.h"

namespace mt {

// Scratch activations for one micro-batch of up to max_tokens tokens (and the internals of layers that save
// none), sized for the widest layer, in backend memory; the feed-forward's buffers for one chunk of
// token_chunk_for(max_tokens, token_chunk) tokens; the normalised LM head's buffers where the model has one.
class DecoderWorkspace {
 public:
  DecoderWorkspace(Backend& backend, const ModelSpec& spec, int64_t max_tokens, int64_t max_seqs, int64_t max_seq_len,
                   int64_t token_chunk = 0);
  ~DecoderWorkspace();
  DecoderWorkspace(const DecoderWorkspace&) = delete;
  DecoderWorkspace& operator=(const DecoderWorkspace&) = delete;

  Backend& backend;
  LayerInternals internals;  // used when the layer saves none
  LayerScratch scratch;
  MoeScratch moe;             // mixture-of-experts layers' buffers (none without them)
  MlpChunk mlp;               // one token chunk's dense feed-forward buffers
  int64_t chunk_tokens = 0;   // tokens per feed-forward chunk
  void* head_weight = nullptr;         // [V, H] normalised LM head rows (normalized_head)
  real* head_weight_grad = nullptr;    // [V, H] fp32 gradient of those rows

 private:
  std::vector<void*> buffers_;
};

// x, y, dx, dy: [tokens, hidden] in backend.dtype(); dweights: the region's fp32 gradient accumulator. dx may
// alias dy. `saved`: the micro-batch's rows of the layer's saved internals — forward fills them, backward reads
// them (and may overwrite them) instead of recomputing; null: the workspace's, recomputed in backward. `moe_kept`:
// a keeping MoE layer's rows of its expert activations (moe_block.h), filled by the pass's first forward, read by
// later forwards and the backward; independent of `saved`.
void decoder_layer_forward(const LayerContext& ctx, int64_t layer, const void* weights, const void* x, void* y,
                           const MicroBatch& mb, DecoderWorkspace& ws, const LayerInternals* saved = nullptr,
                           const MoeKept* moe_kept = nullptr);
void decoder_layer_backward(const LayerContext& ctx, int64_t layer, const void* weights, const void* x,
                            const void* dy, void* dx, real* dweights, const MicroBatch& mb, DecoderWorkspace& ws,
                            const LayerInternals* saved = nullptr, const MoeKept* moe_kept = nullptr);

}  // namespace mt
