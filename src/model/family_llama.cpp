// LlamaForCausalLM (also Yi, DeepSeek LLM and other Llama-architecture checkpoints): pre-norm attention with
// RoPE and GQA, SwiGLU MLP; `attention_bias` puts biases on q, k, v and o, `mlp_bias` on the MLP.
#include "model/families.h"

namespace mt {

void parse_llama(const ConfigKeys& top, ModelSpec& s) {
  parse_dense_model(top, {.max_positions = 2048}, s);
  const bool attention_bias = top.boolean("attention_bias", false), mlp_bias = top.boolean("mlp_bias", false);
  for (LayerSpec& l : s.layers) {
    l.attention.qkv_bias = l.attention.o_bias = attention_bias;
    l.mlp.bias = mlp_bias;
  }
}

}  // namespace mt
