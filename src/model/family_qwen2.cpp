// Qwen2ForCausalLM (also Qwen1.5): Llama's layer with biases on q, k, v (never on o); with use_sliding_window,
// the layers from max_window_layers on (or those layer_types marks sliding) attend within sliding_window.
#include "model/families.h"

namespace mt {

// Sliding windows of the Qwen2-style families (Qwen2, Qwen3).
void apply_qwen_sliding_window(const ConfigKeys& top, ModelSpec& s) {
  const bool null_window = top.j.contains("sliding_window") && top.at("sliding_window").is_null();
  if (!top.boolean("use_sliding_window", false) || null_window) return;
  const int64_t window = sliding_window_size(top, 4096);
  std::vector<bool> fallback(static_cast<size_t>(s.num_layers), false);
  for (int64_t i = std::max<int64_t>(top.integer("max_window_layers", 28), 0); i < s.num_layers; ++i)
    fallback[static_cast<size_t>(i)] = true;
  const std::vector<bool> sliding = sliding_layers(top, s.num_layers, fallback);
  for (size_t i = 0; i < s.layers.size(); ++i) s.layers[i].attention.window = sliding[i] ? window : 0;
}

void parse_qwen2(const ConfigKeys& top, ModelSpec& s) {
  parse_dense_model(top, {.max_positions = 32768, .kv_heads = 32}, s);
  for (LayerSpec& l : s.layers) l.attention.qkv_bias = true;
  apply_qwen_sliding_window(top, s);
}

}  // namespace mt
