// What the mixture-of-experts family parsers share (see families.h): expert counts and widths, the router's
// auxiliary loss switches, and Qwen-MoE's rule for which layers are sparse.
// Invariant: a returned MoeSpec has 0 < top_k <= num_experts and a positive expert width.
#include <algorithm>

#include "model/families.h"

namespace mt {

MoeSpec parse_moe_spec(const ConfigKeys& top, const char* experts_key, int64_t default_experts, const char* width_key,
                       int64_t default_top_k) {
  const char* key = experts_key;
  for (const char* alias : {experts_key, "num_local_experts", "num_experts"})
    if (top.has(alias)) {
      key = alias;
      break;
    }
  MoeSpec m;
  m.num_experts = top.integer(key, default_experts);
  MT_REQUIRE(m.num_experts > 0, "model config {}: key '{}{}' must be positive, got {}", top.origin, top.where, key,
             m.num_experts);
  m.top_k = top.integer("num_experts_per_tok", default_top_k);
  MT_REQUIRE(m.top_k > 0 && m.top_k <= m.num_experts,
             "model config {}: key '{}num_experts_per_tok' ({}) must be between 1 and '{}' ({})", top.origin,
             top.where, m.top_k, key, m.num_experts);
  m.intermediate_size = top.positive(width_key);
  return m;
}

void use_mixtral_expert_names(TensorNames& n) {
  n.router = "block_sparse_moe.gate";
  n.experts = "block_sparse_moe.experts.";
  n.expert_gate = "w1";
  n.expert_up = "w3";
  n.expert_down = "w2";
}

void parse_router_aux_loss(const ConfigKeys& top, ModelSpec& s) {
  s.output_router_logits = top.boolean("output_router_logits", false);
  s.router_aux_loss_coef = top.number("router_aux_loss_coef", 0.001);
  MT_REQUIRE(s.router_aux_loss_coef >= 0.0, "model config {}: key '{}router_aux_loss_coef' must not be negative",
             top.origin, top.where);
}

std::vector<bool> qwen_sparse_layers(const ConfigKeys& top, int64_t num_layers) {
  const int64_t step = top.integer("decoder_sparse_step", 1);
  MT_REQUIRE(step > 0, "model config {}: key 'decoder_sparse_step' must be positive, got {}", top.origin, step);
  std::vector<bool> sparse(static_cast<size_t>(num_layers));
  for (int64_t i = 0; i < num_layers; ++i) sparse[static_cast<size_t>(i)] = (i + 1) % step == 0;
  if (!top.has("mlp_only_layers")) return sparse;
  const nlohmann::json& dense = top.at("mlp_only_layers");
  MT_REQUIRE(dense.is_array(), "model config {}: key 'mlp_only_layers' must be a list of layer indices", top.origin);
  for (const auto& v : dense) {
    MT_REQUIRE(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < num_layers,
               "model config {}: key 'mlp_only_layers' entry {} is not a layer index below {}", top.origin, v.dump(),
               num_layers);
    sparse[v.get<size_t>()] = false;
  }
  return sparse;
}

}  // namespace mt
