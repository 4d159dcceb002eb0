// MixtralForCausalLM: Mistral's attention (a sliding window only where sliding_window is set) and on every layer
// a mixture of num_local_experts SwiGLU experts (w1 gate, w3 up, w2 down) under block_sparse_moe, routed by the
// softmax top num_experts_per_tok with the weights renormalised. router_jitter_noise (random input scaling in
// training) is refused: it would make runs irreproducible.
#include "model/families.h"

namespace mt {

void parse_mixtral(const ConfigKeys& top, ModelSpec& s) {
  parse_dense_model(top, {.max_positions = 131072, .kv_heads = 8, .eps = 1e-5}, s);
  if (top.has("sliding_window")) {
    const int64_t window = sliding_window_size(top, 4096);
    for (LayerSpec& l : s.layers) l.attention.window = window;
  }
  MT_REQUIRE(top.number("router_jitter_noise", 0.0) == 0.0,
             "model config {}: key 'router_jitter_noise' must be 0 (random router noise is not supported)", top.origin);
  MoeSpec moe = parse_moe_spec(top, "num_local_experts", 8, "intermediate_size", 2);
  moe.norm_topk = true;
  for (LayerSpec& l : s.layers) l.moe = moe;
  parse_router_aux_loss(top, s);
  use_mixtral_expert_names(s.names);
}

}  // namespace mt
