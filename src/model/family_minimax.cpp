// MiniMaxForCausalLM (MiniMax-Text-01, transformers' models/minimax): `layer_types` (linear_attention | full_attention;
// the remote code's attn_type_list of 0 | 1 read too; default alternating, full first) picks per layer lightning
// attention (LightningSpec: num_attention_heads × head_dim, each layer's decay factor from its index) or Mixtral's
// full attention (GQA, RoPE; sliding_window where set). Every layer takes its residuals from its norms' outputs,
// scaled by full_attn_*, linear_attn_* and mlp_*_{alpha,beta}_factor (the remote code's layernorm_*_{alpha,beta}
// read too; its postnorm false, the residual before the norm, is refused), and its feed-forward is Mixtral's
// mixture of experts (block_sparse_moe: num_local_experts SwiGLU experts w1/w3/w2, the softmax top
// num_experts_per_tok renormalised; router_jitter_noise refused, the router loss by output_router_logits).
// Partial rotary: rotary_dim (the remote code's) or partial_rotary_factor rotates the first rotary_dim dims of each
// head with frequencies over rotary_dim, as the released model was trained (MiniMax-Text-01: 64 of 128);
// transformers 5.25's MiniMaxRotaryEmbedding ignores the factor and rotates the whole head.
#include <cmath>
#include <string>

#include "model/families.h"
#include "model/rope_config.h"

namespace mt {

namespace {

// "is linear attention" per layer: layer_types, else attn_type_list (0 linear, 1 full), else MiniMaxConfig's default
// (layer i full where i is even).
std::vector<bool> minimax_linear_layers(const ConfigKeys& top, int64_t num_layers) {
  std::vector<bool> linear(static_cast<size_t>(num_layers));
  const char* key = top.has("layer_types") ? "layer_types" : top.has("attn_type_list") ? "attn_type_list" : nullptr;
  if (!key) {
    for (size_t i = 0; i < linear.size(); ++i) linear[i] = i % 2 == 1;
    return linear;
  }
  const nlohmann::json& types = top.at(key);
  MT_REQUIRE(types.is_array() && static_cast<int64_t>(types.size()) == num_layers,
             "model config {}: key '{}' must list {} layer types (num_hidden_layers), got {}", top.origin, key,
             num_layers, types.is_array() ? std::to_string(types.size()) : types.dump());
  const bool names = std::string(key) == "layer_types";
  for (size_t i = 0; i < linear.size(); ++i) {
    linear[i] = names ? types[i] == "linear_attention" : types[i] == 0;
    const bool full = names ? types[i] == "full_attention" : types[i] == 1;
    MT_REQUIRE(linear[i] || full, "model config {}: key '{}' entry {} must be {}, got {}", top.origin, key, i,
               names ? "linear_attention or full_attention" : "0 (linear) or 1 (full attention)", types[i].dump());
  }
  return linear;
}

// A residual factor: the native key, else the remote code's, else 1.
double residual_factor(const ConfigKeys& top, const char* key, const char* legacy_key) {
  const char* k = top.has(key) || !top.has(legacy_key) ? key : legacy_key;
  const double v = top.number(k, 1.0);
  MT_REQUIRE(std::isfinite(v), "model config {}: key '{}' must be finite", top.origin, k);
  return v;
}

}  // namespace

void parse_minimax(const ConfigKeys& top, ModelSpec& s) {
  nlohmann::json config = top.j;
  const bool has_factor = top.has("partial_rotary_factor") || rope_dict(top).has("partial_rotary_factor");
  if (top.has("rotary_dim") && !has_factor) {
    const int64_t heads = top.positive("num_attention_heads");
    const int64_t head_dim = top.integer("head_dim", top.positive("hidden_size") / heads);
    const int64_t rotary = top.positive("rotary_dim");
    MT_REQUIRE(rotary <= head_dim && rotary % 2 == 0,
               "model config {}: key 'rotary_dim' ({}) must be even and at most head_dim ({})", top.origin, rotary,
               head_dim);
    config["partial_rotary_factor"] = static_cast<double>(rotary) / static_cast<double>(head_dim);
  }
  const ConfigKeys keys{config, top.origin, top.where};
  parse_dense_model(keys, {.max_positions = 131072, .kv_heads = 8, .eps = 1e-5, .rope_theta = 1e6}, s);
  MT_REQUIRE(keys.boolean("postnorm", true),
             "model config {}: key 'postnorm' false (residuals before the norms) is not supported: MiniMaxForCausalLM "
             "takes them after the norms", top.origin);
  MT_REQUIRE(keys.integer("shared_intermediate_size", 0) == 0,
             "model config {}: key 'shared_intermediate_size' must be 0 (MiniMaxForCausalLM has no shared expert)",
             top.origin);
  MT_REQUIRE(keys.integer("block_size", 256) > 0, "model config {}: key 'block_size' must be positive", top.origin);
  MT_REQUIRE(keys.number("router_jitter_noise", 0.0) == 0.0,
             "model config {}: key 'router_jitter_noise' must be 0 (random router noise is not supported)", top.origin);
  const int64_t window = keys.has("sliding_window") ? sliding_window_size(keys, 4096) : 0;
  MoeSpec moe = parse_moe_spec(keys, "num_local_experts", 8, "intermediate_size", 2);
  moe.norm_topk = true;
  parse_router_aux_loss(keys, s);
  const LayerSpec::ScaledResidual full{residual_factor(keys, "full_attn_alpha_factor", "layernorm_full_attention_alpha"),
                                       residual_factor(keys, "full_attn_beta_factor", "layernorm_full_attention_beta")};
  const LayerSpec::ScaledResidual linear_mix{
      residual_factor(keys, "linear_attn_alpha_factor", "layernorm_linear_attention_alpha"),
      residual_factor(keys, "linear_attn_beta_factor", "layernorm_linear_attention_beta")};
  const LayerSpec::ScaledResidual ffn{residual_factor(keys, "mlp_alpha_factor", "layernorm_mlp_alpha"),
                                      residual_factor(keys, "mlp_beta_factor", "layernorm_mlp_beta")};
  const std::vector<bool> linear = minimax_linear_layers(keys, s.num_layers);
  for (size_t i = 0; i < s.layers.size(); ++i) {
    LayerSpec& l = s.layers[i];
    l.moe = moe;
    l.normed_residual = true;
    l.ffn_residual = ffn;
    if (linear[i]) {
      l.mixer = MixerKind::lightning_attention;
      l.lightning.num_heads = l.attention.num_heads;
      l.lightning.head_dim = l.attention.head_dim;
      l.lightning.decay_factor =
          1.0 - static_cast<double>(i) / (static_cast<double>(s.num_layers) - 1.0 + 1e-5) + 1e-5;
      l.attention = AttentionSpec{};
      l.attention.rope = -1;
      l.mixer_residual = linear_mix;
    } else {
      l.attention.window = window;
      l.mixer_residual = full;
    }
  }
  use_mixtral_expert_names(s.names);
}

}  // namespace mt
