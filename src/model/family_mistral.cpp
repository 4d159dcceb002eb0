// MistralForCausalLM (also Mistral Large): Llama's layer with a sliding window on every layer (sliding_window,
// default 4096; null: full attention).
#include "model/families.h"

namespace mt {

void parse_mistral(const ConfigKeys& top, ModelSpec& s) {
  parse_dense_model(top, {.max_positions = 131072}, s);
  const bool null_window = top.j.contains("sliding_window") && top.at("sliding_window").is_null();
  if (null_window) return;
  const int64_t window = sliding_window_size(top, 4096);
  for (LayerSpec& l : s.layers) l.attention.window = window;
}

}  // namespace mt
