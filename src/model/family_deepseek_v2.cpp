// DeepseekV2ForCausalLM (DeepSeek-V2, V2-Lite, V2.5): multi-head latent attention (parse_mla_model; q_lora_rank null
// in V2-Lite: q_proj; rope pairs always interleaved, as transformers' complex rotation) and, on the layers from
// first_k_dense_replace on, n_routed_experts experts under a softmax router: topk_method greedy (the top
// num_experts_per_tok) or group_limited_greedy (only experts of the topk_group groups of n_group whose largest
// probability is highest); weights × routed_scaling_factor, never renormalised (transformers' DeepseekV2TopkRouter
// ignores norm_topk_prob); plus n_shared_experts shared experts. transformers computes no router auxiliary loss for it.
#include "model/families.h"

namespace mt {

void parse_deepseek_v2(const ConfigKeys& top, ModelSpec& s) {
  nlohmann::json config = top.j;
  config.erase("rope_interleave");  // DeepseekV2Attention rotates interleaved pairs whatever the config says
  const ConfigKeys fixed{config, top.origin, top.where};
  parse_mla_model(fixed,
                  {.kv_lora_rank = 0, .q_lora_rank = 1536, .qk_nope_head_dim = 128, .qk_rope_head_dim = 64,
                   .v_head_dim = 128, .rope_interleave = true, .dense = {.max_positions = 2048, .eps = 1e-6}},
                  s);
  MoeSpec moe = parse_deepseek_moe(top, {.experts = 64, .top_k = 0, .shared_experts = 2, .routed_scaling = 1.0}, s);
  moe.router = RouterKind::softmax_topk;
  const std::string method = top.string("topk_method", "greedy");
  if (method == "group_limited_greedy") {
    MT_REQUIRE(top.has("n_group") && top.has("topk_group"),
               "model config {}: key 'topk_method' group_limited_greedy needs 'n_group' and 'topk_group'", top.origin);
    parse_expert_groups(top, 1, 1, moe);
  } else {
    MT_REQUIRE(method == "greedy",
               "model config {}: key 'topk_method' is '{}'; {} routes with greedy or group_limited_greedy", top.origin,
               method, s.architecture);
  }
  const std::vector<bool> sparse = deepseek_sparse_layers(top, s.num_layers, 0);
  for (size_t i = 0; i < s.layers.size(); ++i)
    if (sparse[i]) s.layers[i].moe = moe;
}

}  // namespace mt
