// What the latent-attention families share (see families.h): MLA's dims from config.json, the layers' attention
// call (q/k head dim, YaRN's mscale² in the softmax scale) and the DeepSeek mixture of experts (shared experts,
// routed_scaling_factor, which layers are sparse).
// Invariant: a layer parse_mla_model returns is a latent-attention layer whose rope table rotates exactly its
// qk_rope_head_dim; every rejection names the config file, the key and the value.
#include <cmath>

#include "model/families.h"
#include "model/rope_config.h"

namespace mt {
namespace {

// transformers' yarn_apply_mscale: a non-default rope with mscale_all_dim multiplies the softmax scale by
// (0.1·mscale_all_dim·ln(factor) + 1)² where factor > 1.
double mla_softmax_scale(const ConfigKeys& top, int64_t qk_head_dim) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(qk_head_dim));
  const ConfigKeys dict = rope_dict(top);
  const std::string type = dict.string("rope_type", dict.string("type", "default"));
  const double all_dim = dict.number("mscale_all_dim", 0.0);
  if (type == "default" || all_dim == 0.0) return scale;
  const double factor = dict.number("factor");
  const double mscale = factor <= 1.0 ? 1.0 : 0.1 * all_dim * std::log(factor) + 1.0;
  return scale * mscale * mscale;
}

int64_t mla_dim(const ConfigKeys& top, const char* key, int64_t fallback) {
  MT_REQUIRE(top.has(key) || fallback > 0, "model config {}: required key '{}' is missing", top.origin, key);
  const int64_t v = top.integer(key, fallback);
  MT_REQUIRE(v > 0, "model config {}: key '{}' must be positive, got {}", top.origin, key, v);
  return v;
}

}  // namespace

void parse_mla_model(const ConfigKeys& top, const MlaDefaults& d, ModelSpec& s) {
  MlaSpec m;
  m.kv_lora_rank = mla_dim(top, "kv_lora_rank", d.kv_lora_rank);
  m.qk_nope_head_dim = mla_dim(top, "qk_nope_head_dim", d.qk_nope_head_dim);
  m.qk_rope_head_dim = mla_dim(top, "qk_rope_head_dim", d.qk_rope_head_dim);
  m.v_head_dim = mla_dim(top, "v_head_dim", d.v_head_dim);
  MT_REQUIRE(m.qk_rope_head_dim % 2 == 0, "model config {}: key 'qk_rope_head_dim' must be even, got {}", top.origin,
             m.qk_rope_head_dim);
  const bool null_q_lora = top.j.contains("q_lora_rank") && top.at("q_lora_rank").is_null();
  m.q_lora_rank = null_q_lora ? 0 : top.integer("q_lora_rank", d.q_lora_rank);
  MT_REQUIRE(m.q_lora_rank >= 0, "model config {}: key 'q_lora_rank' must be positive or null, got {}", top.origin,
             m.q_lora_rank);
  m.bias = top.boolean("attention_bias", false);
  // transformers sets head_dim = qk_rope_head_dim: the rope table's, and hidden_size need not divide by the heads.
  nlohmann::json config = top.j;
  config["head_dim"] = m.qk_rope_head_dim;
  const ConfigKeys fixed{config, top.origin, top.where};
  parse_dense_model(fixed, d.dense, s);
  m.num_heads = s.layers.front().attention.num_heads;
  MT_REQUIRE(s.layers.front().attention.num_kv_heads == m.num_heads,
             "model config {}: key 'num_key_value_heads' ({}) must equal num_attention_heads ({}): kv_b_proj gives "
             "every head its own key and value",
             top.origin, s.layers.front().attention.num_kv_heads, m.num_heads);
  RopeSpec& rope = s.rope_tables.front();
  MT_REQUIRE(rope.rot_dim() == m.qk_rope_head_dim,
             "model config {}: key 'partial_rotary_factor' ({}) must be 1: latent attention rotates all "
             "qk_rope_head_dim ({}) dims",
             top.origin, rope.partial_rotary_factor, m.qk_rope_head_dim);
  rope.interleaved = top.boolean("rope_interleave", d.rope_interleave);
  AttentionSpec a;
  a.num_heads = a.num_kv_heads = m.num_heads;
  a.head_dim = m.qk_head_dim();
  a.rope = 0;
  a.scale = mla_softmax_scale(top, m.qk_head_dim());
  for (LayerSpec& l : s.layers) {
    l.mixer = MixerKind::latent_attention;
    l.mla = m;
    l.attention = a;
  }
}

MoeSpec parse_deepseek_moe(const ConfigKeys& top, const DeepseekMoeDefaults& d, ModelSpec& s) {
  MoeSpec moe = parse_moe_spec(top, "n_routed_experts", d.experts, "moe_intermediate_size", d.top_k);
  moe.routed_scaling = top.number("routed_scaling_factor", d.routed_scaling);
  MT_REQUIRE(moe.routed_scaling > 0.0, "model config {}: key 'routed_scaling_factor' must be positive, got {}",
             top.origin, moe.routed_scaling);
  const int64_t shared = top.integer("n_shared_experts", d.shared_experts);
  MT_REQUIRE(shared >= 0, "model config {}: key 'n_shared_experts' must not be negative, got {}", top.origin, shared);
  moe.shared_intermediate_size = shared * moe.intermediate_size;
  s.names.shared_gate_proj = "mlp.shared_experts.gate_proj";
  s.names.shared_up_proj = "mlp.shared_experts.up_proj";
  s.names.shared_down_proj = "mlp.shared_experts.down_proj";
  return moe;
}

std::vector<bool> deepseek_sparse_layers(const ConfigKeys& top, int64_t num_layers, int64_t default_first_dense) {
  const int64_t first_dense = top.integer("first_k_dense_replace", default_first_dense);
  MT_REQUIRE(first_dense >= 0, "model config {}: key 'first_k_dense_replace' must not be negative, got {}", top.origin,
             first_dense);
  const int64_t freq = top.integer("moe_layer_freq", 1);
  MT_REQUIRE(freq > 0, "model config {}: key 'moe_layer_freq' must be positive, got {}", top.origin, freq);
  std::vector<bool> sparse(static_cast<size_t>(num_layers));
  for (int64_t i = 0; i < num_layers; ++i) sparse[static_cast<size_t>(i)] = i >= first_dense && i % freq == 0;
  return sparse;
}

void parse_expert_groups(const ConfigKeys& top, int64_t default_groups, int64_t default_topk_groups, MoeSpec& moe) {
  moe.groups = top.integer("n_group", default_groups);
  moe.topk_groups = top.integer("topk_group", default_topk_groups);
  MT_REQUIRE(moe.groups > 0 && moe.groups <= 64 && moe.num_experts % moe.groups == 0,
             "model config {}: key 'n_group' ({}) must divide the {} experts (at most 64 groups)", top.origin,
             moe.groups, moe.num_experts);
  MT_REQUIRE(moe.topk_groups > 0 && moe.topk_groups <= moe.groups,
             "model config {}: key 'topk_group' ({}) must be between 1 and 'n_group' ({})", top.origin, moe.topk_groups,
             moe.groups);
  MT_REQUIRE(moe.top_k <= moe.topk_groups * (moe.num_experts / moe.groups),
             "model config {}: key 'num_experts_per_tok' ({}) exceeds the {} experts of 'topk_group' ({}) groups",
             top.origin, moe.top_k, moe.topk_groups * (moe.num_experts / moe.groups), moe.topk_groups);
}

}  // namespace mt
