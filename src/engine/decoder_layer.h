// The dense decoder layer template (Llama, Qwen2, Qwen3, Mistral): pre-norm attention with RoPE and GQA,
// then a SwiGLU MLP, both residual. Stateless: weights are bound per call. Backward either recomputes the
// layer's internals from its input (only layer inputs need keeping) or reads the internals its forward saved,
// recomputing only the cheap elementwise ones (norm1, norm2, act); both give bitwise the same gradients.
// Invariant: backward(x, dy) writes dx and ACCUMULATES into dweights (a region-shaped buffer).
#pragma once
#include <cstdint>
#include <vector>

#include "engine/layer_context.h"
#include "engine/micro_batch.h"

namespace mt {

// The forward results backward needs that cost a GEMM or attention to recompute: [tokens, ·] in backend.dtype(),
// lse [seqs, n_heads, seq_len] fp32. q_raw/k_raw (before the q/k norm) only where the model has one, else null.
struct LayerInternals {
  void *q_raw = nullptr, *k_raw = nullptr, *q = nullptr, *k = nullptr, *v = nullptr, *attn = nullptr;
  void *h1 = nullptr, *gate = nullptr, *up = nullptr;
  float* lse = nullptr;
};

// Internals for `seqs` sequences of seq_len tokens in backend memory, the buffers appended to `owned` (q_raw/k_raw
// where with_raw).
LayerInternals allocate_internals(Backend& backend, const ModelSpec& spec, int64_t seqs, int64_t seq_len,
                                  bool with_raw, std::vector<void*>& owned);
// The rows of sequences [first_seq, first_seq + seqs) of internals laid out for sequences of seq_len tokens.
LayerInternals internals_rows(const LayerInternals& all, const ModelSpec& spec, int64_t element_size,
                              int64_t first_seq, int64_t seq_len);

// Scratch activations for one micro-batch of up to max_tokens tokens, in backend memory.
class DecoderWorkspace {
 public:
  DecoderWorkspace(Backend& backend, const ModelSpec& spec, int64_t max_tokens, int64_t max_seqs, int64_t max_seq_len);
  ~DecoderWorkspace();
  DecoderWorkspace(const DecoderWorkspace&) = delete;
  DecoderWorkspace& operator=(const DecoderWorkspace&) = delete;

  Backend& backend;
  // Elements of backend.dtype().
  LayerInternals internals;                                                 // used when the layer saves none
  void *norm1, *norm2, *act;                                                // recomputed even from saved internals
  void *d_hidden, *d_norm, *d_attn, *dq, *dk, *dv, *d_gate, *d_up, *d_act;  // backward

 private:
  void* take(int64_t n);
  std::vector<void*> buffers_;
};

// weights: the layer's region in backend.dtype(); x, y, dx, dy: [tokens, hidden] in backend.dtype();
// dweights: the region's fp32 gradient accumulator. dx may alias dy. `saved`: the micro-batch's rows of the
// layer's saved internals — forward fills them, backward reads them (and may overwrite them) instead of
// recomputing; null: the workspace's scratch, recomputed in backward.
void decoder_layer_forward(const LayerContext& ctx, int64_t layer, const void* weights, const void* x, void* y,
                           const MicroBatch& mb, DecoderWorkspace& ws, const LayerInternals* saved = nullptr);
void decoder_layer_backward(const LayerContext& ctx, int64_t layer, const void* weights, const void* x,
                            const void* dy, void* dx, float* dweights, const MicroBatch& mb, DecoderWorkspace& ws,
                            const LayerInternals* saved = nullptr);

}  // namespace mt
