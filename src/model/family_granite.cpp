// GraniteForCausalLM (Granite 3.x dense): Llama's layer with four multipliers — embeddings × embedding_multiplier
// (a Python float, unrounded), the attention logits × attention_multiplier (instead of 1/sqrt(head_dim)), each
// block's output × residual_multiplier before its residual add, the logits ÷ logits_scaling; attention_bias puts
// biases on q, k, v and o, mlp_bias on the MLP.
#include "model/families.h"

namespace mt {

namespace {

double positive_number(const ConfigKeys& top, const char* key) {
  const double v = top.number(key, 1.0);
  MT_REQUIRE(v > 0.0, "model config {}: key '{}' must be positive, got {}", top.origin, key, v);
  return v;
}

}  // namespace

void parse_granite(const ConfigKeys& top, ModelSpec& s) {
  parse_dense_model(top, {.max_positions = 2048}, s);
  const bool attention_bias = top.boolean("attention_bias", false), mlp_bias = top.boolean("mlp_bias", false);
  const double attention_multiplier = positive_number(top, "attention_multiplier");
  const double residual_multiplier = positive_number(top, "residual_multiplier");
  s.embedding_scale = positive_number(top, "embedding_multiplier");
  s.embedding_scale_in_compute_dtype = false;
  s.logit_scale = 1.0 / positive_number(top, "logits_scaling");
  for (LayerSpec& l : s.layers) {
    l.attention.qkv_bias = l.attention.o_bias = attention_bias;
    l.attention.scale = attention_multiplier;
    l.mlp.bias = mlp_bias;
    l.residual_multiplier = residual_multiplier;
  }
}

}  // namespace mt
