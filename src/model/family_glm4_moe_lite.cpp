// Glm4MoeLiteForCausalLM (GLM-4.7-Flash): DeepSeek-V3's multi-head latent attention and router (parse_mla_model;
// sigmoid scores with e_score_correction_bias, n_group / topk_group, norm_topk_prob, routed_scaling_factor) with
// its own defaults; mlp_layer_types says which layers are sparse (default: the first dense, the rest sparse). No
// router auxiliary loss in transformers. The num_nextn_predict_layers MTP layers are carried through export unchanged.
#include "model/families.h"

namespace mt {

void parse_glm4_moe_lite(const ConfigKeys& top, ModelSpec& s) {
  parse_mla_model(top,
                  {.kv_lora_rank = 0, .q_lora_rank = 768, .qk_nope_head_dim = 192, .qk_rope_head_dim = 64,
                   .v_head_dim = 256, .rope_interleave = true, .dense = {.max_positions = 202752, .eps = 1e-5}},
                  s);
  const std::string method = top.string("topk_method", "noaux_tc");
  MT_REQUIRE(method == "noaux_tc", "model config {}: key 'topk_method' is '{}'; {} routes with noaux_tc", top.origin,
             method, s.architecture);
  MoeSpec moe = parse_deepseek_moe(top, {.experts = 64, .top_k = 4, .shared_experts = 1, .routed_scaling = 1.8}, s);
  moe.router = RouterKind::sigmoid_group;
  moe.norm_topk = top.boolean("norm_topk_prob", true);
  parse_expert_groups(top, 1, 1, moe);
  std::vector<bool> sparse(static_cast<size_t>(s.num_layers), true);
  sparse.front() = false;
  if (top.has("mlp_layer_types")) {
    const nlohmann::json& types = top.at("mlp_layer_types");
    MT_REQUIRE(types.is_array() && static_cast<int64_t>(types.size()) == s.num_layers,
               "model config {}: key 'mlp_layer_types' must list {} layer types (num_hidden_layers), got {}",
               top.origin, s.num_layers, types.dump());
    for (size_t i = 0; i < sparse.size(); ++i) {
      MT_REQUIRE(types[i] == "dense" || types[i] == "sparse",
                 "model config {}: key 'mlp_layer_types' entry {} must be dense or sparse, got {}", top.origin, i,
                 types[i].dump());
      sparse[i] = types[i] == "sparse";
    }
  }
  for (size_t i = 0; i < s.layers.size(); ++i)
    if (sparse[i]) s.layers[i].moe = moe;
  s.carries_other_tensors = top.integer("num_nextn_predict_layers", 0) > 0;
}

}  // namespace mt
