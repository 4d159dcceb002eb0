// InternLM2ForCausalLM (InternLM2, InternLM2.5; trust_remote_code): Llama's layer under its own names — one wqkv
// whose rows come grouped by kv head (each group: its q heads, then k, then v; the store regroups them into
// q | k | v), wo, feed_forward.w1/w3/w2 (gate/up/down), attention_norm / ffn_norm, tok_embeddings and output —
// with `bias` on wqkv and wo, and dynamic (NTK) or linear RoPE scaling.
#include "model/families.h"

namespace mt {

void parse_internlm2(const ConfigKeys& top, ModelSpec& s) {
  parse_dense_model(top, {.max_positions = 2048, .pad_token_id = 0}, s);
  const std::string& type = s.rope_tables.front().type;
  MT_REQUIRE(type == "default" || type == "dynamic" || type == "linear",
             "model config {}: InternLM2 rope scaling must be dynamic or linear, got '{}'", top.origin, type);
  const bool bias = top.boolean("bias", true);
  for (LayerSpec& l : s.layers) l.attention.qkv_bias = l.attention.o_bias = bias;
  TensorNames& n = s.names;
  n.embedding = "model.tok_embeddings.weight";
  n.lm_head = "output.weight";
  n.input_norm = "attention_norm";
  n.mlp_norm = "ffn_norm";
  n.qkv = "attention.wqkv";
  n.qkv_grouped = true;
  n.o = "attention.wo";
  n.gate = "feed_forward.w1";
  n.up = "feed_forward.w3";
  n.down = "feed_forward.w2";
}

}  // namespace mt
