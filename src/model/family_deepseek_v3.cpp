// DeepseekV3ForCausalLM (DeepSeek-V3/R1, Kimi K2, Moonlight): multi-head latent attention (parse_mla_model; rope pairs
// interleaved unless rope_interleave is false, YaRN with mscale / mscale_all_dim) and, on the layers from
// first_k_dense_replace on, n_routed_experts experts under the noaux_tc router (sigmoid scores, e_score_correction_bias
// for the choice, the topk_group best of n_group groups by their two best scores, norm_topk_prob,
// routed_scaling_factor) plus the shared experts; the other layers dense MLPs. transformers computes no router
// auxiliary loss for it. The num_nextn_predict_layers MTP layers are carried through export unchanged.
#include "model/families.h"

namespace mt {

void parse_deepseek_v3(const ConfigKeys& top, ModelSpec& s) {
  parse_mla_model(top,
                  {.kv_lora_rank = 0, .q_lora_rank = 1536, .qk_nope_head_dim = 128, .qk_rope_head_dim = 64,
                   .v_head_dim = 128, .rope_interleave = true, .dense = {.max_positions = 4096, .eps = 1e-6}},
                  s);
  const std::string method = top.string("topk_method", "noaux_tc");
  MT_REQUIRE(method == "noaux_tc", "model config {}: key 'topk_method' is '{}'; {} routes with noaux_tc", top.origin,
             method, s.architecture);
  const std::string scoring = top.string("scoring_func", "sigmoid");
  MT_REQUIRE(scoring == "sigmoid", "model config {}: key 'scoring_func' is '{}'; {} scores experts with sigmoid",
             top.origin, scoring, s.architecture);
  MoeSpec moe = parse_deepseek_moe(top, {.experts = 256, .top_k = 8, .shared_experts = 1, .routed_scaling = 2.5}, s);
  moe.router = RouterKind::sigmoid_group;
  moe.norm_topk = top.boolean("norm_topk_prob", true);
  parse_expert_groups(top, 8, 4, moe);
  const std::vector<bool> sparse = deepseek_sparse_layers(top, s.num_layers, 3);
  for (size_t i = 0; i < s.layers.size(); ++i)
    if (sparse[i]) s.layers[i].moe = moe;
  s.carries_other_tensors = top.integer("num_nextn_predict_layers", 0) > 0;
}

}  // namespace mt
