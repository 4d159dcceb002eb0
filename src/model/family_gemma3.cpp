// Gemma3ForCausalLM (model_type gemma3_text: the 270M and 1B text models) and the text tower of
// Gemma3ForConditionalGeneration (config.json nests it under text_config): Gemma 2's layer with q/k RMSNorms
// ((1+w) style), no soft-capping by default, sliding windows on five of every six layers
// (sliding_window_pattern, or layer_types), and one RoPE table per layer type — sliding layers rope_local_base_freq
// (10 000), full layers rope_theta (1 000 000) with the config's rope scaling.
#include "model/families.h"
#include "model/rope_config.h"

namespace mt {

void parse_gemma_common(const ConfigKeys& top, int64_t window_pattern, ModelSpec& s);  // family_gemma2.cpp

void parse_gemma3(const ConfigKeys& top, ModelSpec& s) {
  const bool tied = top.boolean("tie_word_embeddings", true);
  // rope_parameters per layer type (transformers 5) or the old rope_theta / rope_local_base_freq / rope_scaling.
  const ConfigKeys dict = rope_dict(top);
  const bool per_type = dict.has("full_attention") || dict.has("sliding_attention");
  nlohmann::json plain = top.j;
  plain.erase("rope_parameters");
  plain.erase("rope_scaling");
  const ConfigKeys plain_top{plain, top.origin, top.where};
  parse_dense_model(plain_top, {.max_positions = 131072, .kv_heads = 4, .head_dim = 256, .hidden_act = "gelu_pytorch_tanh",
                                    .pad_token_id = 0},
                    s);
  s.tie_word_embeddings = tied;
  parse_gemma_common(top, top.integer("sliding_window_pattern", 6), s);
  for (LayerSpec& l : s.layers) l.attention.qk_norm = true;

  const int64_t head_dim = s.layers.front().attention.head_dim;
  RopeSpec full, local;
  if (per_type) {
    full = parse_rope(plain_top, dict.object("full_attention"), s.max_position_embeddings);
    local = parse_rope(plain_top, dict.object("sliding_attention"), s.max_position_embeddings);
    if (!dict.object("full_attention").has("rope_theta")) full.theta = top.number("rope_theta", 1'000'000.0);
    if (!dict.object("sliding_attention").has("rope_theta")) local.theta = top.number("rope_local_base_freq", 10'000.0);
  } else {
    full = parse_rope(top, dict, s.max_position_embeddings);
    full.theta = top.number("rope_theta", 1'000'000.0);
    local.theta = top.number("rope_local_base_freq", 10'000.0);
  }
  full.head_dim = local.head_dim = head_dim;
  s.rope_tables = {full, local};
  for (LayerSpec& l : s.layers) l.attention.rope = l.attention.window ? 1 : 0;
}

}  // namespace mt
