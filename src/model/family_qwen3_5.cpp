// Qwen3_5ForCausalLM (Qwen3.5 text), and the hybrid layer stack Qwen3.5 and Qwen3-Next share: `layer_types`
// (linear_attention | full_attention; default every full_attention_interval-th layer full) picks per layer a Gated
// DeltaNet mixer (linear_num_{key,value}_heads × linear_{key,value}_head_dim, linear_conv_kernel_dim) or gated full
// attention (q_proj emits query and sigmoid gate per head, q/k norm, partial rotary 0.25 unless given, head_dim 256);
// every RMSNorm outside the DeltaNet is (1 + w)·x̂. Qwen3_5MoeForCausalLM (Qwen3.5-MoE text): the same stack with
// every feed-forward a mixture of experts (qwen3_5_moe_feed_forward).
#include "model/families.h"

namespace mt {

namespace {

int64_t positive_or(const ConfigKeys& top, const char* key, int64_t fallback) {
  return top.has(key) ? top.positive(key) : fallback;
}

DeltaNetSpec parse_deltanet(const ConfigKeys& top) {
  DeltaNetSpec d;
  d.num_k_heads = positive_or(top, "linear_num_key_heads", 16);
  d.num_v_heads = positive_or(top, "linear_num_value_heads", 32);
  d.k_head_dim = positive_or(top, "linear_key_head_dim", 128);
  d.v_head_dim = positive_or(top, "linear_value_head_dim", 128);
  d.conv_kernel = positive_or(top, "linear_conv_kernel_dim", 4);
  MT_REQUIRE(d.num_v_heads % d.num_k_heads == 0,
             "model config {}: key 'linear_num_value_heads' ({}) is not a multiple of linear_num_key_heads ({})",
             top.origin, d.num_v_heads, d.num_k_heads);
  return d;
}

// "is linear attention" per layer, from layer_types or full_attention_interval.
std::vector<bool> linear_layers(const ConfigKeys& top, int64_t num_layers) {
  std::vector<bool> linear(static_cast<size_t>(num_layers));
  if (!top.has("layer_types")) {
    const int64_t interval = positive_or(top, "full_attention_interval", 4);
    for (size_t i = 0; i < linear.size(); ++i) linear[i] = (static_cast<int64_t>(i) + 1) % interval != 0;
    return linear;
  }
  const nlohmann::json& types = top.at("layer_types");
  MT_REQUIRE(types.is_array() && static_cast<int64_t>(types.size()) == num_layers,
             "model config {}: key '{}layer_types' must list {} layer types (num_hidden_layers), got {}", top.origin,
             top.where, num_layers, types.is_array() ? std::to_string(types.size()) : types.dump());
  for (size_t i = 0; i < linear.size(); ++i) {
    linear[i] = types[i] == "linear_attention";
    MT_REQUIRE(linear[i] || types[i] == "full_attention",
               "model config {}: key '{}layer_types' entry {} must be linear_attention or full_attention, got {}",
               top.origin, top.where, i, types[i].dump());
  }
  return linear;
}

}  // namespace

void parse_hybrid_model(const ConfigKeys& top, const DenseDefaults& defaults, ModelSpec& s) {
  nlohmann::json config = top.j;
  if (!config.contains("partial_rotary_factor")) config["partial_rotary_factor"] = 0.25;  // the config classes' default
  const ConfigKeys keys{config, top.origin, top.where};
  parse_dense_model(keys, defaults, s);
  s.norm_style = NormStyle::one_plus_weight;
  const bool bias = keys.boolean("attention_bias", false);
  const DeltaNetSpec deltanet = parse_deltanet(keys);
  const std::vector<bool> linear = linear_layers(keys, s.num_layers);
  for (size_t i = 0; i < s.layers.size(); ++i) {
    LayerSpec& l = s.layers[i];
    if (linear[i]) {
      l.mixer = MixerKind::gated_deltanet;
      l.deltanet = deltanet;
      l.attention = AttentionSpec{};
      l.attention.rope = -1;
    } else {
      l.attention.qkv_bias = l.attention.o_bias = bias;
      l.attention.qk_norm = true;
      l.attention.output_gate = true;
    }
  }
}

MoeSpec parse_qwen_hybrid_moe(const ConfigKeys& top, int64_t default_experts, int64_t default_top_k) {
  nlohmann::json config = top.j;
  for (const char* key : {"moe_intermediate_size", "shared_expert_intermediate_size"})
    if (!top.has(key)) config[key] = 512;  // both config classes' default
  const ConfigKeys keys{config, top.origin, top.where};
  MoeSpec moe = parse_moe_spec(keys, "num_experts", default_experts, "moe_intermediate_size", default_top_k);
  moe.shared_intermediate_size = keys.positive("shared_expert_intermediate_size");
  moe.shared_gate = true;
  return moe;
}

namespace {

// Qwen3_5MoeSparseMoeBlock on every layer: num_experts (256) experts of moe_intermediate_size, the softmax top
// num_experts_per_tok (8) always renormalised, a shared expert scaled by sigmoid(shared_expert_gate(x)).
void qwen3_5_moe_feed_forward(const ConfigKeys& top, ModelSpec& s) {
  MoeSpec moe = parse_qwen_hybrid_moe(top, 256, 8);
  moe.norm_topk = true;
  for (LayerSpec& l : s.layers) {
    l.moe = moe;
    l.mlp.intermediate_size = 0;  // no dense feed-forward in this family
  }
  parse_router_aux_loss(top, s);
  // The published checkpoints fuse each layer's experts; save_pretrained writes one tensor per expert.
  s.names.fused_experts = true;
  s.names.either_expert_layout = true;
}

}  // namespace

void parse_qwen3_5(const ConfigKeys& top, ModelSpec& s) {
  const bool moe = s.family == "qwen3_5_moe_text" || s.family == "qwen3_5_moe";
  if (!moe) {
    parse_hybrid_model(top, {.max_positions = 32768, .kv_heads = 4, .head_dim = 256}, s);
    return;
  }
  nlohmann::json config = top.j;
  if (!top.has("intermediate_size")) config["intermediate_size"] = 1;  // Qwen3_5MoeTextConfig has no dense MLP
  const ConfigKeys keys{config, top.origin, top.where};
  parse_hybrid_model(keys, {.max_positions = 32768, .kv_heads = 2, .head_dim = 256}, s);
  qwen3_5_moe_feed_forward(keys, s);
}

}  // namespace mt
