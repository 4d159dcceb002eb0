// Qwen3MoeForCausalLM (Qwen3-30B-A3B, Qwen3-235B-A22B): Qwen3's attention (per-head q/k RMSNorm, attention_bias,
// head_dim from the config or hidden / heads) and, on the sparse layers (qwen_sparse_layers), num_experts experts
// of moe_intermediate_size routed by the softmax top num_experts_per_tok (renormalised with norm_topk_prob); no
// shared expert; the other layers are dense MLPs of intermediate_size.
#include "model/families.h"

namespace mt {

void apply_qwen_sliding_window(const ConfigKeys& top, ModelSpec& s);  // family_qwen2.cpp

void parse_qwen3_moe(const ConfigKeys& top, ModelSpec& s) {
  parse_dense_model(top, {.max_positions = 32768, .kv_heads = 4}, s);
  const bool attention_bias = top.boolean("attention_bias", false);
  for (LayerSpec& l : s.layers) {
    l.attention.qkv_bias = l.attention.o_bias = attention_bias;
    l.attention.qk_norm = true;
  }
  apply_qwen_sliding_window(top, s);
  MoeSpec moe = parse_moe_spec(top, "num_experts", 128, "moe_intermediate_size", 8);
  moe.norm_topk = top.boolean("norm_topk_prob", false);
  const std::vector<bool> sparse = qwen_sparse_layers(top, s.num_layers);
  for (size_t i = 0; i < s.layers.size(); ++i)
    if (sparse[i]) s.layers[i].moe = moe;
  parse_router_aux_loss(top, s);
}

}  // namespace mt
