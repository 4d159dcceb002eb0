// Olmo3ForCausalLM (OLMo 3): OLMo 2's layers (family_olmo2.cpp), the layers layer_types marks sliding (default: three
// of every four) attending within sliding_window (default 4096), and one RoPE table per layer type as Olmo3Config
// builds them: per-type rope_parameters, or (older configs) rope_scaling and rope_theta for the full layers only —
// the sliding layers then keep the default table of default_theta 500 000 (transformers pops rope_theta for the full
// layers' table before it fills the sliding layers').
#include "model/families.h"
#include "model/rope_config.h"

namespace mt {

void apply_olmo2_layers(const ConfigKeys& top, ModelSpec& s);  // family_olmo2.cpp

void parse_olmo3(const ConfigKeys& top, ModelSpec& s) {
  constexpr double default_theta = 500000.0;
  const ConfigKeys dict = top.object("rope_parameters");
  const bool per_type = dict.has("full_attention") || dict.has("sliding_attention");
  nlohmann::json plain = top.j;
  for (const char* key : {"rope_parameters", "rope_scaling", "rope_theta"}) plain.erase(key);
  const ConfigKeys plain_top{plain, top.origin, top.where};
  parse_dense_model(plain_top, {.max_positions = 2048, .eps = 1e-5, .pad_token_id = 1}, s);
  apply_olmo2_layers(top, s);

  std::vector<bool> fallback(static_cast<size_t>(s.num_layers));
  for (size_t i = 0; i < fallback.size(); ++i) fallback[i] = (i + 1) % 4 != 0;
  const std::vector<bool> sliding = sliding_layers(top, s.num_layers, fallback);
  const ConfigKeys full_dict = per_type ? dict.object("full_attention") : top.object("rope_scaling");
  const ConfigKeys sliding_dict = per_type ? dict.object("sliding_attention") : plain_top.object("rope_scaling");
  nlohmann::json with_theta = plain;
  if (top.has("rope_theta")) with_theta["rope_theta"] = top.at("rope_theta");
  RopeSpec full = parse_rope(ConfigKeys{with_theta, top.origin, top.where}, full_dict, s.max_position_embeddings,
                             default_theta);
  RopeSpec local = parse_rope(plain_top, sliding_dict, s.max_position_embeddings, default_theta);
  full.head_dim = local.head_dim = s.layers.front().attention.head_dim;
  s.rope_tables = {full, local};
  const std::vector<int64_t> windows = layer_windows(top, sliding, 4096);
  for (size_t i = 0; i < s.layers.size(); ++i) {
    s.layers[i].attention.window = windows[i];
    s.layers[i].attention.rope = sliding[i] ? 1 : 0;
  }
}

}  // namespace mt
