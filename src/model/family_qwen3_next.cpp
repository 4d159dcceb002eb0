// Qwen3NextForCausalLM: the Qwen3.5 hybrid stack (family_qwen3_5.cpp) with the DeltaNet input projections fused and
// grouped by k head (in_proj_qkvz: per k head its q, k, v heads, z heads; in_proj_ba: its b heads, a heads). Its
// feed-forward is mixture-of-experts on every decoder_sparse_step-th layer not in mlp_only_layers; such configs are
// refused until the MoE block, a config with num_experts 0 is dense and trains.
#include <algorithm>

#include "model/families.h"

namespace mt {

void parse_qwen3_next(const ConfigKeys& top, ModelSpec& s) {
  parse_hybrid_model(top, {.max_positions = 32768, .kv_heads = 2, .head_dim = 256}, s);
  const int64_t experts = top.integer("num_experts", 512);
  const int64_t step = top.has("decoder_sparse_step") ? top.positive("decoder_sparse_step") : 1;
  std::vector<int64_t> dense_only;
  if (top.has("mlp_only_layers") && !top.at("mlp_only_layers").is_null())
    dense_only = top.at("mlp_only_layers").get<std::vector<int64_t>>();
  int64_t moe_layers = 0;
  for (int64_t i = 0; i < s.num_layers; ++i)
    if (experts > 0 && (i + 1) % step == 0 && std::find(dense_only.begin(), dense_only.end(), i) == dense_only.end())
      ++moe_layers;
  if (moe_layers > 0) refuse_mixture_of_experts(top, s, experts);
  s.names.dn_qkvz = "linear_attn.in_proj_qkvz";
  s.names.dn_ba = "linear_attn.in_proj_ba";
}

}  // namespace mt
