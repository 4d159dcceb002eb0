// BaichuanForCausalLM (Baichuan 2; trust_remote_code): Llama's layer with one fused W_pack (rows q | k | v, no
// GQA) and an LM head whose rows are normalised to unit length (NormHead). The 7B rotates with RoPE; the 13B's
// config has no max_position_embeddings (model_max_length instead) and its attention uses ALiBi biases, no RoPE.
#include "model/families.h"

namespace mt {

void parse_baichuan(const ConfigKeys& top, ModelSpec& s) {
  const bool alibi = !top.has("max_position_embeddings");
  nlohmann::json config = top.j;
  if (alibi) config["max_position_embeddings"] = top.integer("model_max_length", 4096);
  const ConfigKeys fixed{config, top.origin, top.where};
  parse_dense_model(fixed, {.max_positions = 4096, .pad_token_id = 0}, s);
  MT_REQUIRE(top.number("z_loss_weight", 0.0) == 0.0,
             "model config {}: key 'z_loss_weight' must be 0 (the z-loss is not implemented)", top.origin);
  MT_REQUIRE(!s.tie_word_embeddings, "model config {}: Baichuan's normalised LM head cannot be tied to the embeddings",
             top.origin);
  for (LayerSpec& l : s.layers) {
    MT_REQUIRE(l.attention.num_kv_heads == l.attention.num_heads,
               "model config {}: Baichuan's W_pack has as many kv heads as heads", top.origin);
    if (alibi) {
      l.attention.alibi = true;
      l.attention.rope = -1;
    }
  }
  s.normalized_head = true;
  s.names.qkv = "self_attn.W_pack";
}

}  // namespace mt
