// Qwen3ForCausalLM: Qwen2's layer without the q/k/v biases (attention_bias puts them on q, k, v and o), with a
// per-head RMSNorm on q and k before RoPE and head_dim 128 unless given.
#include "model/families.h"

namespace mt {

void apply_qwen_sliding_window(const ConfigKeys& top, ModelSpec& s);  // family_qwen2.cpp

void parse_qwen3(const ConfigKeys& top, ModelSpec& s) {
  parse_dense_model(top, {.max_positions = 32768, .kv_heads = 32, .head_dim = 128}, s);
  const bool attention_bias = top.boolean("attention_bias", false);
  for (LayerSpec& l : s.layers) {
    l.attention.qkv_bias = l.attention.o_bias = attention_bias;
    l.attention.qk_norm = true;
  }
  apply_qwen_sliding_window(top, s);
}

}  // namespace mt
