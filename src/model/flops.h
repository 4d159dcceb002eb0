// FLOP accounting of a training step, two ways: the paper's 6 × parameters × tokens (kept for comparison with
// the reference implementation), and model FLOPs as torchtitan counts them — 6 × matrix-multiply parameters (every
// projection and the LM head, not the embedding lookup) × tokens, plus each layer's attention term
// 12 × heads × head_dim × keys per token, keys = min(window, seq_len) on sliding layers (min(chunk, seq_len) on
// chunked ones) and seq_len on others; a
// Gated DeltaNet layer's term is its state updates, 18 × v_heads × k_head_dim × v_head_dim per token (the
// recurrence's three state-vector products, 2 FLOPs each, forward and twice in backward), plus its depthwise conv
// 6 × conv channels × kernel (conv1d weights are 3-D and not matmul parameters; Llama 4's fused 3-D expert tensors
// are).
// Both count active parameters: a mixture-of-experts layer's token computes with its top_k experts only.
// Invariant: both are forward + backward FLOPs per step, without recompute.
#pragma once
#include <cstdint>
#include <vector>

#include "model/model_spec.h"
#include "model/param_layout.h"

namespace mt {

struct StepFlops {
  double six_n = 0;   // 6 · parameters · tokens
  double model = 0;   // 6 · matmul parameters · tokens + attention
};

StepFlops step_flops(const ModelSpec& spec, const ParamLayout& layout, int64_t tokens, int64_t seq_len);
// The model term per token of each region of the layout (the embedding's 0; a layer's active matrices and its
// attention or delta-rule term; the head's): step_flops' model term is their sum.
std::vector<double> region_flops_per_token(const ModelSpec& spec, const ParamLayout& layout, int64_t seq_len);
// A layer's attention (or delta-rule) term of region_flops_per_token: forward and backward per token at seq_len.
double mixer_flops_per_token(const LayerSpec& layer, int64_t seq_len);
// step_flops' model term for one token of sequences of seq_len (the spec's own layout).
double model_flops_per_token(const ModelSpec& spec, int64_t seq_len);

}  // namespace mt
