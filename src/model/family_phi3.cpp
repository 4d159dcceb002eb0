// Phi3ForCausalLM (Phi-3, Phi-3.5, Phi-4, Phi-4-mini): Llama's layer with one fused qkv_proj (rows q | k | v) and
// one fused gate_up_proj (rows gate | up), partial rotary (partial_rotary_factor), longrope scaling with short and
// long factors (old "su"/"yarn" names mean longrope), and an optional sliding window on every layer.
#include "model/families.h"

namespace mt {

void parse_phi3(const ConfigKeys& top, ModelSpec& s) {
  nlohmann::json config = top.j;
  // transformers' Phi3Config: "su" and "yarn" in rope_scaling are longrope.
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (!config.contains(key) || !config[key].is_object()) continue;
    for (const char* type_key : {"type", "rope_type"})
      if (config[key].contains(type_key) && (config[key][type_key] == "su" || config[key][type_key] == "yarn"))
        config[key][type_key] = "longrope";
  }
  if (!config.contains("original_max_position_embeddings") || config["original_max_position_embeddings"].is_null())
    config["original_max_position_embeddings"] = 4096;  // Phi3Config's default
  const ConfigKeys fixed{config, top.origin, top.where};
  parse_dense_model(fixed, {.max_positions = 4096, .eps = 1e-5, .pad_token_id = 32000}, s);
  const std::string& type = s.rope_tables.front().type;
  MT_REQUIRE(type == "default" || type == "longrope",
             "model config {}: Phi-3 rope type must be default or longrope, got '{}'", top.origin, type);
  const bool null_window = !top.has("sliding_window");
  if (!null_window) {
    const int64_t window = sliding_window_size(top, 0);
    for (LayerSpec& l : s.layers) l.attention.window = window;
  }
  s.names.qkv = "self_attn.qkv_proj";
  s.names.gate_up = "mlp.gate_up_proj";
}

}  // namespace mt
