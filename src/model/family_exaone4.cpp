// Exaone4ForCausalLM (EXAONE 4.0): OLMo 2's post-block norms (family_olmo2.cpp: no norms before the blocks, one
// after each) with a per-head RMSNorm on q and k before RoPE, no biases; the layers layer_types marks sliding attend
// within sliding_window (default 4096) and, where sliding_window is set, the full layers have no RoPE. Without
// layer_types an integer sliding_window_pattern p (default 4) makes every p-th layer full (transformers reads no
// string pattern there).
#include "model/families.h"

namespace mt {

void parse_exaone4(const ConfigKeys& top, ModelSpec& s) {
  parse_dense_model(top, {.max_positions = 2048, .kv_heads = 32, .eps = 1e-5}, s);
  for (LayerSpec& l : s.layers) {
    l.attention.qk_norm = true;
    l.pre_norms = false;
    l.post_norms = true;
  }
  s.names.attn_out_norm = "post_attention_layernorm";
  s.names.mlp_out_norm = "post_feedforward_layernorm";

  const bool null_window = top.j.contains("sliding_window") && top.at("sliding_window").is_null();
  std::vector<bool> fallback(static_cast<size_t>(s.num_layers), false);
  if (!top.has("layer_types") && !null_window) {
    MT_REQUIRE(!top.has("sliding_window_pattern") || top.at("sliding_window_pattern").is_number_integer(),
               "model config {}: key 'sliding_window_pattern' is {}; without layer_types it must be an integer",
               top.origin, top.at("sliding_window_pattern").dump());
    const int64_t pattern = top.integer("sliding_window_pattern", 4);
    MT_REQUIRE(pattern > 0, "model config {}: key 'sliding_window_pattern' must be positive, got {}", top.origin,
               pattern);
    for (size_t i = 0; i < fallback.size(); ++i) fallback[i] = (static_cast<int64_t>(i) + 1) % pattern != 0;
  }
  const std::vector<bool> sliding = sliding_layers(top, s.num_layers, fallback);
  const std::vector<int64_t> windows = layer_windows(top, sliding, 4096);
  for (size_t i = 0; i < s.layers.size(); ++i) {
    s.layers[i].attention.window = windows[i];
    s.layers[i].attention.rope = null_window || sliding[i] ? 0 : -1;
  }
}

}  // namespace mt
