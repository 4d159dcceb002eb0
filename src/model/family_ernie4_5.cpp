// Ernie4_5ForCausalLM (ERNIE-4.5 dense, 0.3B): Llama's layer with RoPE on interleaved pairs (2i, 2i+1), biases on
// every projection where use_bias says so, head_dim 128 unless given, rope_theta 500 000 and tied embeddings by
// default.
#include "model/families.h"

namespace mt {

void parse_ernie4_5(const ConfigKeys& top, ModelSpec& s) {
  parse_dense_model(top, {.max_positions = 131072, .kv_heads = 2, .head_dim = 128, .eps = 1e-5, .pad_token_id = 0,
                          .rope_theta = 500000.0},
                    s);
  s.tie_word_embeddings = top.boolean("tie_word_embeddings", true);
  const bool bias = top.boolean("use_bias", false);
  for (LayerSpec& l : s.layers) {
    l.attention.qkv_bias = l.attention.o_bias = bias;
    l.mlp.bias = bias;
  }
  s.rope_tables.front().interleaved = true;
}

}  // namespace mt
