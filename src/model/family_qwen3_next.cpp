// Qwen3NextForCausalLM: the Qwen3.5 hybrid stack (family_qwen3_5.cpp) with the DeltaNet input projections fused and
// grouped by k head (in_proj_qkvz: per k head its q, k, v heads, z heads; in_proj_ba: its b heads, a heads). Its
// feed-forward is Qwen3NextSparseMoeBlock (num_experts, default 512, of moe_intermediate_size; the softmax top
// num_experts_per_tok, default 10, renormalised unless norm_topk_prob is false; a shared expert scaled by
// sigmoid(shared_expert_gate(x))) on every decoder_sparse_step-th layer not in mlp_only_layers, and a dense MLP of
// intermediate_size on the others; num_experts 0 makes every layer dense. Experts one tensor per expert, as the
// published checkpoints and save_pretrained have them (fused 3-D tensors are read too).
#include "model/families.h"

namespace mt {

void parse_qwen3_next(const ConfigKeys& top, ModelSpec& s) {
  parse_hybrid_model(top, {.max_positions = 32768, .kv_heads = 2, .head_dim = 256}, s);
  s.names.dn_qkvz = "linear_attn.in_proj_qkvz";
  s.names.dn_ba = "linear_attn.in_proj_ba";
  const int64_t experts = top.integer("num_experts", 512);
  MT_REQUIRE(experts >= 0, "model config {}: key 'num_experts' must not be negative, got {}", top.origin, experts);
  if (experts == 0) return;
  MoeSpec moe = parse_qwen_hybrid_moe(top, 512, 10);
  moe.norm_topk = top.boolean("norm_topk_prob", true);
  const std::vector<bool> sparse = qwen_sparse_layers(top, s.num_layers);
  for (size_t i = 0; i < s.layers.size(); ++i)
    if (sparse[i]) s.layers[i].moe = moe;
  parse_router_aux_loss(top, s);
  s.names.either_expert_layout = true;
}

}  // namespace mt
