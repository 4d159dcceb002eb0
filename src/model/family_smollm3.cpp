// SmolLM3ForCausalLM (SmolLM3-3B): Llama's layer without RoPE on the layers no_rope_layers marks 0 (default: every
// no_rope_layer_interval-th layer, 4), rope_theta 2 000 000 and tied embeddings by default; the layers layer_types
// marks sliding (default: the NoPE layers, with use_sliding_window and sliding_window set) attend within
// sliding_window. attention_bias puts biases on q, k, v and o, mlp_bias on the MLP.
#include "model/families.h"

namespace mt {

namespace {

// no_rope_layers: 1 where the layer rotates, 0 where it is NoPE.
std::vector<bool> rope_layers(const ConfigKeys& top, int64_t num_layers) {
  std::vector<bool> rotates(static_cast<size_t>(num_layers));
  if (!top.has("no_rope_layers")) {
    const int64_t interval = top.integer("no_rope_layer_interval", 4);
    MT_REQUIRE(interval > 0, "model config {}: key 'no_rope_layer_interval' must be positive, got {}", top.origin,
               interval);
    for (size_t i = 0; i < rotates.size(); ++i) rotates[i] = (static_cast<int64_t>(i) + 1) % interval != 0;
    return rotates;
  }
  const nlohmann::json& flags = top.at("no_rope_layers");
  MT_REQUIRE(flags.is_array() && static_cast<int64_t>(flags.size()) == num_layers,
             "model config {}: key 'no_rope_layers' must list {} flags (num_hidden_layers), got {}", top.origin,
             num_layers, flags.dump());
  for (size_t i = 0; i < rotates.size(); ++i) {
    MT_REQUIRE(flags[i] == 0 || flags[i] == 1, "model config {}: key 'no_rope_layers' entry {} must be 0 or 1, got {}",
               top.origin, i, flags[i].dump());
    rotates[i] = flags[i] == 1;
  }
  return rotates;
}

}  // namespace

void parse_smollm3(const ConfigKeys& top, ModelSpec& s) {
  parse_dense_model(top, {.max_positions = 32768, .kv_heads = 4, .pad_token_id = 128004, .rope_theta = 2000000.0}, s);
  s.tie_word_embeddings = top.boolean("tie_word_embeddings", true);
  const bool attention_bias = top.boolean("attention_bias", false), mlp_bias = top.boolean("mlp_bias", false);
  const std::vector<bool> rotates = rope_layers(top, s.num_layers);
  const bool sliding_on = top.boolean("use_sliding_window", false) && top.has("sliding_window");
  std::vector<bool> fallback(rotates.size());
  for (size_t i = 0; i < fallback.size(); ++i) fallback[i] = sliding_on && !rotates[i];
  // transformers' masks follow layer_types alone (use_sliding_window only shapes the default layer_types).
  const std::vector<bool> sliding = sliding_layers(top, s.num_layers, fallback);
  const std::vector<int64_t> windows = layer_windows(top, sliding, 0);
  for (size_t i = 0; i < s.layers.size(); ++i) {
    AttentionSpec& a = s.layers[i].attention;
    a.qkv_bias = a.o_bias = attention_bias;
    s.layers[i].mlp.bias = mlp_bias;
    a.rope = rotates[i] ? 0 : -1;
    a.window = windows[i];
  }
}

}  // namespace mt
