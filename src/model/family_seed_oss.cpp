// SeedOssForCausalLM (Seed-OSS-36B): Llama's layer with biases on q, k and v (attention_bias, default true), on o
// only where attention_out_bias says so, on the MLP where mlp_bias does; head_dim 128 unless given. Its dropout
// (attention_dropout, residual_dropout: 0.1 in the published config) is not applied: every family trains without
// dropout here.
#include "model/families.h"

namespace mt {

void parse_seed_oss(const ConfigKeys& top, ModelSpec& s) {
  parse_dense_model(top, {.max_positions = 524288, .kv_heads = 8, .head_dim = 128, .pad_token_id = 1}, s);
  const bool qkv_bias = top.boolean("attention_bias", true), o_bias = top.boolean("attention_out_bias", false);
  const bool mlp_bias = top.boolean("mlp_bias", false);
  for (LayerSpec& l : s.layers) {
    l.attention.qkv_bias = qkv_bias;
    l.attention.o_bias = o_bias;
    l.mlp.bias = mlp_bias;
  }
}

}  // namespace mt
