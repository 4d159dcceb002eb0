// Cohere2ForCausalLM (Command R7B, Command A): Cohere's parallel layer without q/k norm; sliding layers (layer_types,
// or every layer but each sliding_window_pattern-th, default 4) attend within sliding_window (default 4096) with
// RoPE, the global layers attend to everything without RoPE (sliding_window null: every layer global). head_dim is
// hidden_size / num_attention_heads whatever config.json says, as Cohere2Config sets it.
#include "model/families.h"

namespace mt {

void parse_cohere2(const ConfigKeys& top, ModelSpec& s) {
  nlohmann::json config = top.j;
  config.erase("head_dim");  // Cohere2Config derives it
  const ConfigKeys keys{config, top.origin, top.where};
  parse_cohere_common(keys, {.max_positions = 8192, .eps_key = "layer_norm_eps", .eps = 1e-5, .pad_token_id = 0}, s);
  const int64_t pattern = top.integer("sliding_window_pattern", 4);
  MT_REQUIRE(pattern > 0, "model config {}: key 'sliding_window_pattern' must be positive, got {}", top.origin,
             pattern);
  std::vector<bool> fallback(static_cast<size_t>(s.num_layers));
  for (size_t i = 0; i < fallback.size(); ++i) fallback[i] = (static_cast<int64_t>(i) + 1) % pattern != 0;
  const std::vector<bool> sliding = sliding_layers(top, s.num_layers, fallback);
  // A null sliding_window leaves every layer global, so none has RoPE (Cohere2Attention rotates only where its
  // window is set).
  const bool null_window = top.j.contains("sliding_window") && top.at("sliding_window").is_null();
  const int64_t window = null_window ? 0 : sliding_window_size(top, 4096);
  for (size_t i = 0; i < s.layers.size(); ++i) {
    AttentionSpec& a = s.layers[i].attention;
    a.window = sliding[i] ? window : 0;
    a.rope = a.window > 0 ? 0 : -1;
  }
}

}  // namespace mt
