// Qwen2MoeForCausalLM (Qwen1.5-MoE, Qwen2-57B-A14B): Qwen2's attention (qkv_bias, default true) and, on the
// sparse layers (qwen_sparse_layers), num_experts experts of moe_intermediate_size routed by the softmax top
// num_experts_per_tok (renormalised only with norm_topk_prob), plus a shared expert of
// shared_expert_intermediate_size scaled by sigmoid(shared_expert_gate(x)); the other layers are dense MLPs of
// intermediate_size.
#include "model/families.h"

namespace mt {

void apply_qwen_sliding_window(const ConfigKeys& top, ModelSpec& s);  // family_qwen2.cpp

void parse_qwen2_moe(const ConfigKeys& top, ModelSpec& s) {
  parse_dense_model(top, {.max_positions = 32768, .kv_heads = 16}, s);
  const bool qkv_bias = top.boolean("qkv_bias", true);
  for (LayerSpec& l : s.layers) l.attention.qkv_bias = qkv_bias;
  apply_qwen_sliding_window(top, s);
  MoeSpec moe = parse_moe_spec(top, "num_experts", 60, "moe_intermediate_size", 4);
  moe.norm_topk = top.boolean("norm_topk_prob", false);
  moe.shared_intermediate_size = top.positive("shared_expert_intermediate_size");
  moe.shared_gate = true;
  const std::vector<bool> sparse = qwen_sparse_layers(top, s.num_layers);
  for (size_t i = 0; i < s.layers.size(); ++i)
    if (sparse[i]) s.layers[i].moe = moe;
  parse_router_aux_loss(top, s);
}

}  // namespace mt
