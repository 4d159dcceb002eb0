// The mixture-of-experts feed-forward block of a decoder layer, as transformers' Mixtral / Qwen2-MoE / Qwen3-MoE /
// GLM-4.5 / GPT-OSS / Llama 4 MoE blocks compute it: a router (linear, with GPT-OSS's bias; softmax top-k, optionally
// renormalised, sigmoid group-limited, or GPT-OSS's softmax of the top logits), the routed rows grouped by expert
// with a stable permutation (token order within each expert), grouped SwiGLU (GPT-OSS: clamped, with per-expert
// biases) expert GEMMs, the weighted combine back to token order (Llama 4: the weights scale the gathered inputs
// and the outputs add unweighted), and an optional shared expert (sigmoid-gated for Qwen2-MoE).
// Stateless apart from MoeScratch (per micro-batch). Backward recomputes the block's forward from its input
// (routing, permutation and expert activations), so a MoE layer saves nothing beyond the layer's h1.
// Invariant: forward writes out (=); backward writes d_in (=) and ACCUMULATES into the region's fp32 gradient dw;
// the forward of a pass's first sweep (moe_aux->collect) adds the layer's router statistics.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/layer_context.h"
#include "engine/micro_batch.h"

namespace mt {

// Per-micro-batch buffers of the widest MoE layer (R = tokens · top_k routed rows), in backend memory.
struct MoeScratch {
  void *logits = nullptr, *d_logits = nullptr;           // [T, E]
  float *probs = nullptr, *weights = nullptr, *d_weights = nullptr;  // [T, E], [T, k], [T, k] fp32
  int32_t *idx = nullptr, *offsets = nullptr, *source = nullptr, *row_of = nullptr;  // [T,k], [E+1], [R], [R]
  std::vector<int64_t> host_offsets;                     // [E+1]
  void *xs = nullptr, *ys = nullptr;                     // [R, H]; backward: ys holds the gathered output gradient
  void *gate = nullptr, *up = nullptr, *act = nullptr, *d_act = nullptr, *d_gate = nullptr, *d_up = nullptr;  // [R, I]
  void *s_gate = nullptr, *s_up = nullptr, *s_act = nullptr, *d_s_act = nullptr, *d_s_gate = nullptr,
       *d_s_up = nullptr;                                // [T, shared I]
  void *s_out = nullptr, *d_s_out = nullptr;             // [T, H]
  void *s_logit = nullptr, *d_s_logit = nullptr;         // [T]
};

// Bytes of MoeScratch for micro-batches of `tokens` tokens (0 without MoE layers); elements of `element_size`.
int64_t moe_scratch_bytes(const ModelSpec& spec, int64_t tokens, int64_t element_size);
MoeScratch allocate_moe_scratch(Backend& backend, const ModelSpec& spec, int64_t tokens, std::vector<void*>& owned);

void moe_block_forward(const LayerContext& ctx, int64_t layer, const void* w, const void* in, void* out,
                       const MicroBatch& mb, MoeScratch& s);
void moe_block_backward(const LayerContext& ctx, int64_t layer, const void* w, const void* in, const void* d_out,
                        void* d_in, float* dw, const MicroBatch& mb, MoeScratch& s);

}  // namespace mt
