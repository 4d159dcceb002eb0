// CohereForCausalLM (Command-R, Command-R+): attention and MLP in parallel from one LayerNorm without bias
// (layer_norm_eps), y = x + attn(norm(x)) + mlp(norm(x)); RoPE on interleaved pairs (2i, 2i+1); logits × logit_scale
// (default 0.0625); optional per-head q/k LayerNorm without bias and with a weight per head (use_qk_norm), before RoPE;
// biases on q, k, v, o where attention_bias; a final LayerNorm without bias; embeddings tied unless
// tie_word_embeddings is false. parse_cohere_common is what Cohere2 shares (family_cohere2.cpp).
#include <cmath>

#include "model/families.h"

namespace mt {

void parse_cohere_common(const ConfigKeys& top, const DenseDefaults& defaults, ModelSpec& s) {
  parse_dense_model(top, defaults, s);
  s.norm_kind = NormKind::layer;
  s.tie_word_embeddings = top.boolean("tie_word_embeddings", true);  // the Cohere configs' default
  s.logit_scale = top.number("logit_scale", 0.0625);
  MT_REQUIRE(s.logit_scale > 0.0 && std::isfinite(s.logit_scale),
             "model config {}: key 'logit_scale' must be a positive number, got {}", top.origin, s.logit_scale);
  const bool bias = top.boolean("attention_bias", false);
  for (LayerSpec& l : s.layers) {
    l.parallel_residual = true;
    l.attention.qkv_bias = l.attention.o_bias = bias;
  }
  s.rope_tables.front().interleaved = true;
}

void parse_cohere(const ConfigKeys& top, ModelSpec& s) {
  parse_cohere_common(
      top, {.max_positions = 8192, .eps_key = "layer_norm_eps", .eps = 1e-5, .pad_token_id = 0, .rope_theta = 500000.0},
      s);
  const bool qk_norm = top.boolean("use_qk_norm", false);
  for (LayerSpec& l : s.layers) l.attention.qk_layer_norm = qk_norm;
}

}  // namespace mt
