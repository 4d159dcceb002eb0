// Olmo2ForCausalLM (OLMo 2) and the pieces OLMo 3 shares (family_olmo3.cpp): no norms before the blocks, an RMSNorm
// after each block (post_attention_layernorm, post_feedforward_layernorm) before its residual add, and an RMSNorm over
// the whole q and k projections (q_norm [heads·head_dim], k_norm [kv_heads·head_dim]) before RoPE; attention_bias
// puts biases on q, k, v and o. Every RMSNorm forms its weight product in fp32 and rounds once ((w·x̂).to(dtype)).
#include "model/families.h"

namespace mt {

void apply_olmo2_layers(const ConfigKeys& top, ModelSpec& s) {
  const bool bias = top.boolean("attention_bias", false);
  for (LayerSpec& l : s.layers) {
    l.attention.qkv_bias = l.attention.o_bias = bias;
    l.attention.qk_norm = l.attention.qk_norm_whole = true;
    l.pre_norms = false;
    l.post_norms = true;
  }
  s.names.attn_out_norm = "post_attention_layernorm";
  s.names.mlp_out_norm = "post_feedforward_layernorm";
  s.norm_style = NormStyle::weight_fp32_product;
}

void parse_olmo2(const ConfigKeys& top, ModelSpec& s) {
  parse_dense_model(top, {.max_positions = 2048, .eps = 1e-5, .pad_token_id = 1}, s);
  apply_olmo2_layers(top, s);
}

}  // namespace mt
