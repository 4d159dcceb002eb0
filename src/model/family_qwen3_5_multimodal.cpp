// Qwen3_5ForConditionalGeneration / Qwen3_5MoeForConditionalGeneration (the published Qwen3.5 checkpoints): the text
// tower from config.json's text_config, read as Qwen3_5ForCausalLM (Qwen3_5MoeForCausalLM) reads its own config,
// under the checkpoint's model.language_model.* names. The vision tower (model.visual.*) and the multi-token-prediction
// head (mtp.*) stay frozen and are carried through export unchanged.
#include "model/families.h"

namespace mt {

void parse_qwen3_5_multimodal(const ConfigKeys& top, ModelSpec& s) {
  MT_REQUIRE(top.has("text_config"), "model config {}: {} needs 'text_config'", top.origin, s.architecture);
  nlohmann::json text = top.at("text_config");
  MT_REQUIRE(text.is_object(), "model config {}: key 'text_config' must be an object", top.origin);
  if (!text.contains("tie_word_embeddings")) text["tie_word_embeddings"] = top.boolean("tie_word_embeddings", false);
  // Nested configs may be saved as their difference from Qwen3_5TextConfig's (Qwen3_5MoeTextConfig's) defaults.
  const nlohmann::json dense_defaults = {{"vocab_size", 248320},       {"hidden_size", 4096},
                                         {"intermediate_size", 12288}, {"num_hidden_layers", 32},
                                         {"num_attention_heads", 16},  {"max_position_embeddings", 32768}};
  const nlohmann::json moe_defaults = {{"vocab_size", 248320},       {"hidden_size", 2048},
                                       {"num_hidden_layers", 40},    {"num_attention_heads", 16},
                                       {"max_position_embeddings", 32768}};
  for (const auto& [key, value] : (s.family == "qwen3_5_moe" ? moe_defaults : dense_defaults).items())
    if (!text.contains(key)) text[key] = value;
  const ConfigKeys inner{text, top.origin, "text_config."};
  parse_qwen3_5(inner, s);
  TensorNames& n = s.names;
  n.embedding = "model.language_model.embed_tokens.weight";
  n.final_norm = "model.language_model.norm.weight";
  n.layer_prefix = "model.language_model.layers.";
  s.carries_other_tensors = true;
}

}  // namespace mt
