// The mixture-of-experts feed-forward block of a decoder layer, as transformers' Mixtral / Qwen2-MoE / Qwen3-MoE /
// GLM-4.5 / GPT-OSS / Llama 4 MoE blocks compute it: a router (linear, with GPT-OSS's bias; softmax top-k, optionally
// renormalised, sigmoid group-limited, or GPT-OSS's softmax of the top logits), the routed rows grouped by expert
// with a stable permutation (token order within each expert), grouped SwiGLU (GPT-OSS: clamped, with per-expert
// biases) expert GEMMs, the weighted combine back to token order (Llama 4: the weights scale the gathered inputs
// and the outputs add unweighted), and an optional shared expert (sigmoid-gated for Qwen2-MoE).
// Each expert's up weight follows its gate weight in the region (MoeOffsets), so [W_gate; W_up] is one [2I, H]
// matrix: one grouped GEMM writes gate_up [R, 2I] (row r = [gate_r | up_r]), the activation reads it at leading
// dimension 2I, and backward's d_gate_up gives d_xs and d[W_gate; W_up] in one grouped GEMM each; the shared
// expert's gate and up likewise ([T, 2·shared I], one linear each way).
// Stateless apart from MoeScratch (per micro-batch) and, for a keeping layer, its MoeKept rows. Backward either
// recomputes the block's forward from its input up to the expert activations (routing, permutation, the gate_up
// GEMM), or, where the layer keeps them (MoeKept: what its forward wrote), recomputes only the gather of the
// experts' inputs and the elementwise activations; both give bitwise the same gradients.
// Invariant: forward writes out (=); backward writes d_in (=) and ACCUMULATES into the region's fp32 gradient dw;
// the forward of a pass's first sweep (moe_aux->collect) adds the layer's router statistics; a forward over filled
// MoeKept rows computes only the outputs from them and adds no statistics.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/layer_context.h"
#include "engine/micro_batch.h"

namespace mt {

// Per-micro-batch buffers of the widest MoE layer (R = tokens · top_k routed rows), in backend memory.
struct MoeScratch {
  void *logits = nullptr, *d_logits = nullptr;           // [T, E]
  real *probs = nullptr, *weights = nullptr, *d_weights = nullptr;   // [T, E], [T, k], [T, k] fp32
  int32_t *idx = nullptr, *offsets = nullptr, *source = nullptr, *row_of = nullptr;  // [T,k], [E+1], [R], [R]
  std::vector<int64_t> host_offsets;                     // [E+1]
  void *xs = nullptr, *ys = nullptr;                     // [R, H]; backward: ys holds the gathered output gradient
  void *gate_up = nullptr, *d_gate_up = nullptr;        // [R, 2I]: row r = [gate_r | up_r] (their gradients)
  void *act = nullptr, *d_act = nullptr;                 // [R, I]
  void *s_gate_up = nullptr, *d_s_gate_up = nullptr;     // [T, 2·shared I]
  void *s_act = nullptr, *d_s_act = nullptr;             // [T, shared I]
  void *s_out = nullptr, *d_s_out = nullptr;             // [T, H]
  void *s_logit = nullptr, *d_s_logit = nullptr;         // [T]
};

// What a keeping MoE layer's forward leaves for its backward, over one micro-batch's rows (R = tokens · top_k): the
// routing (fp32 probabilities and weights, top-k indices), the permutation (source rows, each routed row's place, the
// experts' offsets on the backend and the host), the experts' gate and up projections (biases added) as one [R, 2I]
// gate_up, and the shared expert's gate_up (a gated one's output and logit too). The minimal set without expert GEMMs
// in backward: the gathered inputs xs are one gather from the block input, the activations elementwise from gate_up.
struct MoeKept {
  real *probs = nullptr, *weights = nullptr;                     // [T, E], [T, k]
  int32_t *idx = nullptr, *source = nullptr, *row_of = nullptr;  // [T, k], [R], [R]
  void* gate_up = nullptr;                                       // [R, 2I]
  void* s_gate_up = nullptr;                                     // [T, 2·shared I]
  void *s_out = nullptr, *s_logit = nullptr;                     // [T, H], [T]: a gated shared expert's
  int32_t* offsets = nullptr;                                    // [E+1] of this micro-batch, backend memory
  std::vector<int64_t>* host_offsets = nullptr;                  // the same on the host
  bool filled = false;  // the pass's first forward wrote them: later forwards and the backward read them
};

// The last `keep_layers` MoE layers keep their expert activations (as the layers after recompute_layers save their
// internals); whether `layer` is one of them.
bool moe_layer_keeps(const ModelSpec& spec, int64_t layer, int64_t keep_layers);
int64_t moe_layer_count(const ModelSpec& spec);
// Bytes of layer `layer`'s MoeKept over `tokens` tokens in `micro_batches` micro-batches (0 for a dense layer).
int64_t moe_kept_bytes(const ModelSpec& spec, int64_t layer, int64_t tokens, int64_t micro_batches,
                       int64_t element_size);
// Layer `layer`'s MoeKept for `tokens` tokens (pointers at row 0, offsets of `micro_batches` micro-batches).
MoeKept allocate_moe_kept(Backend& backend, const ModelSpec& spec, int64_t layer, int64_t tokens,
                          int64_t micro_batches, std::vector<void*>& owned);
// The rows of a micro-batch from token first_token, micro-batch number `micro_batch`, of `all`.
MoeKept moe_kept_rows(const MoeKept& all, const ModelSpec& spec, int64_t layer, int64_t element_size,
                      int64_t first_token, int64_t micro_batch, std::vector<int64_t>* host_offsets, bool filled);

// Bytes of MoeScratch for micro-batches of `tokens` tokens (0 without MoE layers); elements of `element_size`.
int64_t moe_scratch_bytes(const ModelSpec& spec, int64_t tokens, int64_t element_size);
MoeScratch allocate_moe_scratch(Backend& backend, const ModelSpec& spec, int64_t tokens, std::vector<void*>& owned);

void moe_block_forward(const LayerContext& ctx, int64_t layer, const void* w, const void* in, void* out,
                       const MicroBatch& mb, MoeScratch& s, const MoeKept* kept = nullptr);
void moe_block_backward(const LayerContext& ctx, int64_t layer, const void* w, const void* in, const void* d_out,
                        void* d_in, real* dw, const MicroBatch& mb, MoeScratch& s, const MoeKept* kept = nullptr);

}  // namespace mt
