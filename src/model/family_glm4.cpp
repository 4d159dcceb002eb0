// Glm4ForCausalLM (GLM-4-0414): biases on q, k, v (attention_bias, default true), half of each head rotated
// (partial_rotary_factor 0.5 unless given) in GLM's interleaved pairs, sandwich norms (post_self_attn_layernorm,
// post_mlp_layernorm) and a fused gate_up_proj.
#include "model/families.h"
#include "model/rope_config.h"

namespace mt {

void parse_glm4(const ConfigKeys& top, ModelSpec& s) {
  nlohmann::json config = top.j;
  if (!top.has("partial_rotary_factor") && !rope_dict(top).has("partial_rotary_factor"))
    config["partial_rotary_factor"] = 0.5;  // Glm4Config's default
  const ConfigKeys fixed{config, top.origin, top.where};
  parse_dense_model(
      fixed, {.max_positions = 131072, .kv_heads = 2, .head_dim = 128, .eps = 1.5625e-7, .pad_token_id = 151329}, s);
  const bool bias = top.boolean("attention_bias", true);
  for (LayerSpec& l : s.layers) {
    l.attention.qkv_bias = bias;
    l.post_norms = true;
  }
  s.rope_tables.front().interleaved = true;
  s.names.attn_out_norm = "post_self_attn_layernorm";
  s.names.mlp_out_norm = "post_mlp_layernorm";
  s.names.gate_up = "mlp.gate_up_proj";
}

}  // namespace mt
