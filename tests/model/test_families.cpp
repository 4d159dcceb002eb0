// The family parsers of the layer-kinds round: what each reads from config.json into per-layer specs (Gemma 2/3,
// Phi-3, GLM-4, InternLM2, Baichuan 2), trust_remote_code, and one-line errors naming the config and the field.
#include <cmath>
#include <nlohmann/json.hpp>

#include "catch.h"
#include "core/error.h"
#include "model/model_spec.h"
#include "model/param_layout.h"

using nlohmann::json;

namespace {

json tiny(const char* architecture) {
  return {{"architectures", {architecture}}, {"vocab_size", 128},         {"hidden_size", 64},
          {"intermediate_size", 96},        {"num_hidden_layers", 4},    {"num_attention_heads", 4},
          {"num_key_value_heads", 2},       {"max_position_embeddings", 256}};
}

mt::ModelSpec parse(const json& j, bool trust = false) { return mt::parse_model_spec(j, "cfg.json", trust); }

std::string parse_error(const json& j, bool trust = false) {
  try {
    parse(j, trust);
  } catch (const mt::Error& e) {
    return e.what();
  }
  return "(no error)";
}
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::vector<int64_t> windows(const mt::ModelSpec& s) {
  std::vector<int64_t> w;
  for (const auto& l : s.layers) w.push_back(l.attention.window);
  return w;
}

}  // namespace

TEST_CASE("Gemma 2: sandwich (1+w) norms, scaled embeddings, soft-caps, alternating windows", "[families]") {
  json j = tiny("Gemma2ForCausalLM");
  j["head_dim"] = 16;
  j["query_pre_attn_scalar"] = 64;
  const mt::ModelSpec s = parse(j);
  CHECK(s.family == "gemma2");
  CHECK(s.norm_style == mt::NormStyle::one_plus_weight);
  CHECK(s.embedding_scale == std::sqrt(64.0));
  CHECK(s.final_logit_softcap == 30.0);
  CHECK(s.tie_word_embeddings);
  CHECK(windows(s) == std::vector<int64_t>{4096, 0, 4096, 0});
  for (const auto& l : s.layers) {
    CHECK(l.post_norms);
    CHECK(l.mlp.activation == mt::Activation::gelu_tanh);
    CHECK(l.attention.softcap == 50.0);
    CHECK(l.attention.scale == 1.0 / 8.0);
  }
  const mt::ParamLayout layout = mt::make_param_layout(s);
  CHECK(layout.layer(0).params[layout.layer(0).params.size() - 1].hf_name ==
        "model.layers.0.post_feedforward_layernorm.weight");
  j["attn_logit_softcapping"] = nullptr;  // None in transformers: no soft-cap
  j["final_logit_softcapping"] = nullptr;
  const mt::ModelSpec none = parse(j);
  CHECK(none.final_logit_softcap == 0.0);
  CHECK(none.layers[0].attention.softcap == 0.0);
  CHECK(s.padding_idx == 0);  // Gemma2Config's pad_token_id
  CHECK(none.padding_idx == 0);
  j["pad_token_id"] = nullptr;
  CHECK(parse(j).padding_idx == -1);
  j["pad_token_id"] = 128;
  CHECK(has(parse_error(j), "'pad_token_id' (128) must name a token below vocab_size (128)"));
  j["pad_token_id"] = 3;
  CHECK(parse(j).padding_idx == 3);
  j["layer_types"] = {"full_attention", "sliding_attention"};
  CHECK(has(parse_error(j), "'layer_types' must list 4 layer types"));
}

TEST_CASE("Gemma 3: q/k norms, five sliding layers in six, local and global RoPE tables", "[families]") {
  json j = tiny("Gemma3ForCausalLM");
  j["num_hidden_layers"] = 7;
  j["rope_theta"] = 1e6;
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  const mt::ModelSpec s = parse(j);
  CHECK(s.family == "gemma3_text");
  REQUIRE(s.rope_tables.size() == 2);
  CHECK(s.rope_tables[0].theta == 1e6);
  CHECK(s.rope_tables[0].type == "linear");
  CHECK(s.rope_tables[1].theta == 10000.0);
  CHECK(s.rope_tables[1].type == "default");
  CHECK(windows(s) == std::vector<int64_t>{4096, 4096, 4096, 4096, 4096, 0, 4096});
  for (const auto& l : s.layers) {
    CHECK(l.attention.qk_norm);
    CHECK(l.attention.rope == (l.attention.window ? 1 : 0));
    CHECK(l.attention.softcap == 0.0);
  }
  CHECK(s.final_logit_softcap == 0.0);
}

TEST_CASE("Gemma 3 multimodal: the text tower from text_config, legacy names matched to the weights", "[families]") {
  json text = tiny("Gemma3ForCausalLM");
  text.erase("architectures");
  mt::ModelSpec s = parse({{"architectures", {"Gemma3ForConditionalGeneration"}}, {"text_config", text}});
  CHECK(s.family == "gemma3");
  CHECK(s.carries_other_tensors);
  CHECK(s.tie_word_embeddings);
  CHECK(s.names.embedding == "model.language_model.embed_tokens.weight");
  mt::match_tensor_names(s, [](const std::string& n) { return n == "language_model.model.embed_tokens.weight"; });
  CHECK(s.names.embedding == "language_model.model.embed_tokens.weight");
  CHECK(s.names.layer_prefix == "language_model.model.layers.");
  CHECK(s.names.lm_head == "language_model.lm_head.weight");
  CHECK(has(parse_error({{"architectures", {"Gemma3ForConditionalGeneration"}}}), "needs 'text_config'"));
}

TEST_CASE("Phi-3: fused qkv and gate_up, partial rotary, longrope (su), 4096 original positions", "[families]") {
  json j = tiny("Phi3ForCausalLM");
  j["partial_rotary_factor"] = 0.5;
  j["rope_scaling"] = {{"type", "su"}, {"short_factor", {1.0, 1.0, 1.0, 1.0}}, {"long_factor", {2.0, 2.0, 2.0, 2.0}}};
  j["max_position_embeddings"] = 16384;
  const mt::ModelSpec s = parse(j);
  const mt::RopeSpec& r = s.rope_tables[0];
  CHECK(r.type == "longrope");
  CHECK(r.rot_dim() == 8);
  CHECK(r.original_max_position_embeddings == 4096);
  CHECK(r.factor == 4.0);
  CHECK(s.names.qkv == "self_attn.qkv_proj");
  CHECK(s.names.gate_up == "mlp.gate_up_proj");
  const mt::ParamLayout layout = mt::make_param_layout(s);
  CHECK(layout.layer(0).params[1].hf_name == "model.layers.0.self_attn.qkv_proj.weight");
  CHECK(layout.layer(0).params[1].shape == std::vector<int64_t>{64 + 2 * 32, 64});
  j["rope_scaling"]["short_factor"] = {1.0, 1.0};
  CHECK(has(parse_error(j), "short_factor and long_factor must have 4 entries"));
}

TEST_CASE("GLM-4: interleaved half rotary, q/k/v bias, sandwich norms", "[families]") {
  json j = tiny("Glm4ForCausalLM");
  CHECK(parse(j).layers[0].attention.head_dim == 128);  // Glm4Config's default head_dim
  j["head_dim"] = 16;
  const mt::ModelSpec s = parse(j);
  CHECK(s.rope_tables[0].interleaved);
  CHECK(s.rope_tables[0].rot_dim() == 8);  // head_dim 16 × partial_rotary_factor 0.5 (the default)
  for (const auto& l : s.layers) {
    CHECK(l.attention.qkv_bias);
    CHECK_FALSE(l.attention.o_bias);
    CHECK(l.post_norms);
  }
  CHECK(s.names.attn_out_norm == "post_self_attn_layernorm");
}

TEST_CASE("trust_remote_code families: refused without the flag, then InternLM2 and Baichuan 2 read", "[families]") {
  json intern = tiny("InternLM2ForCausalLM");
  intern["bias"] = false;
  intern["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}};
  const std::string msg = parse_error(intern);
  CHECK(has(msg, "cfg.json"));
  CHECK(has(msg, "model.trust_remote_code: true"));
  const mt::ModelSpec s = parse(intern, true);
  CHECK(s.rope_tables[0].type == "dynamic");
  CHECK(s.names.qkv == "attention.wqkv");
  CHECK(s.names.qkv_grouped);
  const mt::ParamLayout layout = mt::make_param_layout(s);
  CHECK(layout.embedding().params[0].hf_name == "model.tok_embeddings.weight");
  CHECK(layout.head_region().params.back().hf_name == "output.weight");
  CHECK(layout.layer(1).params[1].rows.groups == 2);

  json rope = tiny("BaichuanForCausalLM");
  rope["num_key_value_heads"] = 4;
  CHECK(has(parse_error(rope), "trust_remote_code"));
  const mt::ModelSpec b7 = parse(rope, true);
  CHECK(b7.normalized_head);
  CHECK(b7.layers[0].attention.rope == 0);
  json alibi = rope;
  alibi.erase("max_position_embeddings");
  alibi["model_max_length"] = 512;
  const mt::ModelSpec b13 = parse(alibi, true);
  CHECK(b13.max_position_embeddings == 512);
  for (const auto& l : b13.layers) {
    CHECK(l.attention.alibi);
    CHECK(l.attention.rope == -1);
  }
  alibi["z_loss_weight"] = 0.1;
  CHECK(has(parse_error(alibi, true), "'z_loss_weight' must be 0"));
  alibi["z_loss_weight"] = 0;
  alibi["num_key_value_heads"] = 2;
  CHECK(has(parse_error(alibi, true), "as many kv heads as heads"));
}
