// Glm4MoeForCausalLM (GLM-4.5, GLM-4.5-Air): attention with q/k/v biases (attention_bias), an optional per-head q/k
// norm (use_qk_norm), half of each head rotated in rotate_half pairs (partial_rotary_factor 0.5 unless given); the
// first first_k_dense_replace layers dense MLPs, the others n_routed_experts experts of moe_intermediate_size under
// a sigmoid router (DeepSeek-V3's: e_score_correction_bias for the choice, n_group / topk_group group-limited top k,
// norm_topk_prob, routed_scaling_factor) plus n_shared_experts shared experts as one MLP. transformers computes no
// router load-balancing loss for it. The num_nextn_predict_layers MTP layers are carried through export unchanged.
#include "model/families.h"
#include "model/rope_config.h"

namespace mt {

void parse_glm4_moe(const ConfigKeys& top, ModelSpec& s) {
  nlohmann::json config = top.j;
  if (!top.has("partial_rotary_factor") && !rope_dict(top).has("partial_rotary_factor"))
    config["partial_rotary_factor"] = 0.5;  // Glm4MoeConfig's default
  const ConfigKeys fixed{config, top.origin, top.where};
  parse_dense_model(fixed, {.max_positions = 131072, .kv_heads = 8, .eps = 1e-5}, s);
  const bool bias = top.boolean("attention_bias", false), qk_norm = top.boolean("use_qk_norm", false);
  MoeSpec moe = parse_moe_spec(top, "n_routed_experts", 128, "moe_intermediate_size", 8);
  moe.router = RouterKind::sigmoid_group;
  moe.norm_topk = top.boolean("norm_topk_prob", true);
  moe.routed_scaling = top.number("routed_scaling_factor", 1.0);
  parse_expert_groups(top, 1, 1, moe);
  const int64_t shared = top.integer("n_shared_experts", 1);
  MT_REQUIRE(shared >= 0, "model config {}: key 'n_shared_experts' must not be negative", top.origin);
  moe.shared_intermediate_size = shared * moe.intermediate_size;
  const int64_t first_dense = top.integer("first_k_dense_replace", 1);
  MT_REQUIRE(first_dense >= 0, "model config {}: key 'first_k_dense_replace' must not be negative", top.origin);
  for (int64_t i = 0; i < s.num_layers; ++i) {
    LayerSpec& l = s.layers[static_cast<size_t>(i)];
    l.attention.qkv_bias = bias;
    l.attention.qk_norm = qk_norm;
    if (i >= first_dense) l.moe = moe;
  }
  // The published checkpoints' multi-token-prediction layers (model.layers.<num_hidden_layers>..): transformers does
  // not use them in training; they stay frozen and are exported as they came.
  s.carries_other_tensors = top.integer("num_nextn_predict_layers", 0) > 0;
  TensorNames& n = s.names;
  n.shared_gate_proj = "mlp.shared_experts.gate_proj";
  n.shared_up_proj = "mlp.shared_experts.up_proj";
  n.shared_down_proj = "mlp.shared_experts.down_proj";
}

}  // namespace mt
