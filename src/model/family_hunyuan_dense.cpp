// HunYuanDenseV1ForCausalLM (Hunyuan dense, 0.5B-7B): Llama's layer with a per-head RMSNorm on q and k applied after
// RoPE (query_layernorm, key_layernorm); attention_bias puts biases on q, k, v and o. Its rope_scaling of type
// dynamic with an `alpha` is transformers' NTK-alpha RoPE: the default table with base
// rope_theta · alpha^(head_dim / (head_dim − 2)), independent of the sequence length.
#include <cmath>

#include "model/families.h"
#include "model/rope_config.h"

namespace mt {

void parse_hunyuan_dense(const ConfigKeys& top, ModelSpec& s) {
  nlohmann::json config = top.j;
  const ConfigKeys dict = rope_dict(top);
  const std::string type = dict.string("rope_type", dict.string("type", "default"));
  if (type == "dynamic" && dict.has("alpha")) {
    const double alpha = dict.number("alpha");
    MT_REQUIRE(alpha > 0.0, "model config {}: key '{}alpha' must be positive, got {}", top.origin, dict.where, alpha);
    const int64_t heads = top.positive("num_attention_heads");
    const int64_t head_dim = top.integer("head_dim", top.positive("hidden_size") / heads);
    MT_REQUIRE(head_dim > 2, "model config {}: key 'head_dim' must exceed 2 for NTK-alpha RoPE, got {}", top.origin,
               head_dim);
    const double theta = dict.number("rope_theta", top.number("rope_theta", 10000.0));
    const double d = static_cast<double>(head_dim);
    config.erase("rope_scaling");
    config["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", theta * std::pow(alpha, d / (d - 2.0))}};
  }
  const ConfigKeys fixed{config, top.origin, top.where};
  parse_dense_model(fixed, {.max_positions = 2048, .eps = 1e-5, .pad_token_id = 0}, s);
  const bool bias = top.boolean("attention_bias", false);
  for (LayerSpec& l : s.layers) {
    l.attention.qkv_bias = l.attention.o_bias = bias;
    l.attention.qk_norm = l.attention.qk_norm_after_rope = true;
  }
  s.names.q_norm = "self_attn.query_layernorm";
  s.names.k_norm = "self_attn.key_layernorm";
}

}  // namespace mt
