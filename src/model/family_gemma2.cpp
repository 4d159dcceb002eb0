// Gemma2ForCausalLM: embeddings scaled by √hidden_size, (1+w) RMSNorms, sandwich norms, tanh-GELU GLU, logit scale
// query_pre_attn_scalar^−½, attention and final logit soft-capping, sliding-window attention on every other layer
// (layer_types; default: even layers slide), tied embeddings by default.
#include <cmath>

#include "model/families.h"

namespace mt {
namespace {

// A soft-cap key: absent takes the family default, null means none (as transformers' None).
double softcap(const ConfigKeys& top, const char* key, double fallback) {
  if (top.j.contains(key) && top.at(key).is_null()) return 0.0;
  return top.number(key, fallback);
}

}  // namespace

// The pieces Gemma 2 and Gemma 3 share: names, norms, embedding scale, scale, soft-caps, windows.
void parse_gemma_common(const ConfigKeys& top, int64_t window_pattern, ModelSpec& s) {
  for (LayerSpec& l : s.layers) {
    l.post_norms = true;
    l.attention.qkv_bias = l.attention.o_bias = top.boolean("attention_bias", false);
    l.attention.scale = 1.0 / std::sqrt(top.number("query_pre_attn_scalar", 256.0));
    l.attention.softcap = softcap(top, "attn_logit_softcapping", s.family == "gemma2" ? 50.0 : 0.0);
  }
  MT_REQUIRE(s.layers.front().attention.scale > 0 && std::isfinite(s.layers.front().attention.scale),
             "model config {}: key 'query_pre_attn_scalar' must be positive", top.origin);
  for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"})
    MT_REQUIRE(top.number(key, 0.0) >= 0.0, "model config {}: key '{}' must be positive or null", top.origin, key);
  s.final_logit_softcap = softcap(top, "final_logit_softcapping", s.family == "gemma2" ? 30.0 : 0.0);
  s.norm_style = NormStyle::one_plus_weight;
  s.embedding_scale = std::sqrt(static_cast<double>(s.hidden_size));
  s.names.attn_out_norm = "post_attention_layernorm";
  s.names.mlp_norm = "pre_feedforward_layernorm";
  s.names.mlp_out_norm = "post_feedforward_layernorm";

  std::vector<bool> fallback(static_cast<size_t>(s.num_layers));
  for (size_t i = 0; i < fallback.size(); ++i) fallback[i] = (i + 1) % static_cast<size_t>(window_pattern) != 0;
  const std::vector<bool> sliding = sliding_layers(top, s.num_layers, fallback);
  const bool null_window = top.j.contains("sliding_window") && top.at("sliding_window").is_null();
  const int64_t window = null_window ? 0 : sliding_window_size(top, 4096);
  for (size_t i = 0; i < s.layers.size(); ++i) s.layers[i].attention.window = sliding[i] ? window : 0;
}

void parse_gemma2(const ConfigKeys& top, ModelSpec& s) {
  const bool tied = top.boolean("tie_word_embeddings", true);
  parse_dense_model(top, {.max_positions = 8192, .kv_heads = 4, .head_dim = 256, .hidden_act = "gelu_pytorch_tanh", .pad_token_id = 0}, s);
  s.tie_word_embeddings = tied;
  parse_gemma_common(top, 2, s);
}

}  // namespace mt
