// Gemma3ForConditionalGeneration (Gemma 3 4B, 12B, 27B): the text tower of the multimodal checkpoint, read from
// config.json's text_config as Gemma3ForCausalLM reads its own config, under the checkpoint's names
// (model.language_model.* as transformers 5 saves them; language_model.model.* in checkpoints saved before).
// The vision tower and the projector stay frozen and are carried through export unchanged.
#include "model/families.h"

namespace mt {

void parse_gemma3_multimodal(const ConfigKeys& top, ModelSpec& s) {
  MT_REQUIRE(top.has("text_config"), "model config {}: Gemma3ForConditionalGeneration needs 'text_config'", top.origin);
  nlohmann::json text = top.at("text_config");
  MT_REQUIRE(text.is_object(), "model config {}: key 'text_config' must be an object", top.origin);
  // Gemma3Config ties the head to the embeddings unless it says otherwise at either level.
  if (!text.contains("tie_word_embeddings")) text["tie_word_embeddings"] = top.boolean("tie_word_embeddings", true);
  // Nested configs are saved as their difference from Gemma3TextConfig's defaults.
  const nlohmann::json defaults = {{"vocab_size", 262208},        {"hidden_size", 2304},
                                   {"intermediate_size", 9216},   {"num_hidden_layers", 26},
                                   {"num_attention_heads", 8},    {"num_key_value_heads", 4},
                                   {"head_dim", 256},             {"max_position_embeddings", 131072},
                                   {"query_pre_attn_scalar", 256}, {"sliding_window", 4096}};
  for (const auto& [key, value] : defaults.items())
    if (!text.contains(key)) text[key] = value;
  const ConfigKeys inner{text, top.origin, "text_config."};
  parse_gemma3(inner, s);
  TensorNames& n = s.names;
  n.embedding = "model.language_model.embed_tokens.weight";
  n.final_norm = "model.language_model.norm.weight";
  n.layer_prefix = "model.language_model.layers.";
  n.legacy_prefixes = {{"model.language_model.", "language_model.model."}, {"lm_head.", "language_model.lm_head."}};
  s.carries_other_tensors = true;
}

}  // namespace mt
