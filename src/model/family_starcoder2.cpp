// Starcoder2ForCausalLM (StarCoder2 3B, 7B, 15B): nn.LayerNorm with bias (norm_epsilon) before attention, before the
// MLP and at the end; biases on q, k, v, o and the MLP (use_bias, default true); a non-gated MLP c_fc → hidden_act
// (gelu_pytorch_tanh) → c_proj; a sliding window on every layer (sliding_window; null or absent: full attention);
// embeddings tied unless tie_word_embeddings is false. Dropouts are training noise we do not model.
#include "model/families.h"

namespace mt {

void parse_starcoder2(const ConfigKeys& top, ModelSpec& s) {
  parse_dense_model(top,
                    {.max_positions = 4096, .kv_heads = 2, .hidden_act = "gelu_pytorch_tanh", .eps_key = "norm_epsilon",
                     .eps = 1e-5},
                    s);
  s.norm_kind = NormKind::layer_with_bias;
  s.tie_word_embeddings = top.boolean("tie_word_embeddings", true);  // Starcoder2Config's default
  const bool bias = top.boolean("use_bias", true);
  const int64_t window = top.has("sliding_window") ? sliding_window_size(top, 0) : 0;
  for (LayerSpec& l : s.layers) {
    l.attention.qkv_bias = l.attention.o_bias = bias;
    l.attention.window = window;
    l.mlp.gated = false;
    l.mlp.bias = bias;
  }
  s.names.up = "mlp.c_fc";
  s.names.down = "mlp.c_proj";
}

}  // namespace mt
