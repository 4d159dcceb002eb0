// The dense decoder layer template (Llama, Qwen2, Qwen3, Mistral): pre-norm attention with RoPE and GQA,
// then a SwiGLU MLP, both residual. Stateless: weights are bound per call; backward recomputes the layer's
// internals from its input, so only layer inputs ever need to be kept.
// Invariant: backward(x, dy) writes dx and ACCUMULATES into dweights (a region-shaped buffer).
#pragma once
#include <cstdint>
#include <vector>

#include "engine/layer_context.h"
#include "engine/micro_batch.h"

namespace mt {

// Scratch activations for one micro-batch of up to max_tokens tokens, in backend memory.
class DecoderWorkspace {
 public:
  DecoderWorkspace(Backend& backend, const ModelSpec& spec, int64_t max_tokens, int64_t max_seqs, int64_t max_seq_len);
  ~DecoderWorkspace();
  DecoderWorkspace(const DecoderWorkspace&) = delete;
  DecoderWorkspace& operator=(const DecoderWorkspace&) = delete;

  Backend& backend;
  // Elements of backend.dtype(), except lse (fp32).
  void *norm1, *q_raw, *k_raw, *q, *k, *v, *attn, *h1, *norm2, *gate, *up, *act;          // forward
  void *d_hidden, *d_norm, *d_attn, *dq, *dk, *dv, *d_gate, *d_up, *d_act;                // backward
  float* lse;

 private:
  void* take(int64_t n);
  std::vector<void*> buffers_;
};

// weights: the layer's region in backend.dtype(); x, y, dx, dy: [tokens, hidden] in backend.dtype();
// dweights: the region's fp32 gradient accumulator. dx may alias dy.
void decoder_layer_forward(const LayerContext& ctx, int64_t layer, const void* weights, const void* x, void* y,
                           const MicroBatch& mb, DecoderWorkspace& ws);
void decoder_layer_backward(const LayerContext& ctx, int64_t layer, const void* weights, const void* x,
                            const void* dy, void* dx, float* dweights, const MicroBatch& mb, DecoderWorkspace& ws);

}  // namespace mt
