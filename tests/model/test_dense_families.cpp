// The dense RMSNorm families of issue #42: what the Seed-OSS, ERNIE 4.5, SmolLM3, Granite, Hunyuan dense, OLMo 2/3
// and EXAONE 4 parsers read into per-layer specs (their config classes' defaults included), the tensors their layouts
// name, and their one-line refusals.
#include <cmath>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "core/error.h"
#include "model/model_spec.h"
#include "model/param_layout.h"

using nlohmann::json;

namespace {

json dense(const char* architecture, int64_t layers = 4) {
  return {{"architectures", {architecture}}, {"vocab_size", 128},        {"hidden_size", 64},
          {"intermediate_size", 96},         {"num_hidden_layers", layers}, {"num_attention_heads", 4},
          {"num_key_value_heads", 2},        {"head_dim", 16},           {"max_position_embeddings", 256}};
}

std::string parse_error(const json& j) {
  try {
    mt::parse_model_spec(j, "cfg.json");
  } catch (const mt::Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<std::string> layer_tensors(const mt::ModelSpec& s, int64_t layer) {
  const std::string prefix = "model.layers." + std::to_string(layer) + ".";
  std::vector<std::string> names;
  const mt::ParamLayout layout = mt::make_param_layout(s);
  for (const auto& p : layout.layer(layer).params) names.push_back(p.hf_name.substr(prefix.size()));
  return names;
}

}  // namespace

TEST_CASE("Seed-OSS: biases on q, k, v by default, on o by attention_out_bias", "[families][dense-families]") {
  json j = dense("SeedOssForCausalLM");
  mt::ModelSpec s = mt::parse_model_spec(j, "cfg.json");
  CHECK(s.family == "seed_oss");
  CHECK(s.layers[0].attention.qkv_bias);
  CHECK(!s.layers[0].attention.o_bias);
  j["attention_out_bias"] = true;
  j["mlp_bias"] = true;
  s = mt::parse_model_spec(j, "cfg.json");
  CHECK(s.layers[0].attention.o_bias);
  CHECK(s.layers[0].mlp.bias);
}

TEST_CASE("ERNIE 4.5: interleaved RoPE, theta 500000 and tied embeddings by default", "[families][dense-families]") {
  json j = dense("Ernie4_5ForCausalLM");
  const mt::ModelSpec s = mt::parse_model_spec(j, "cfg.json");
  CHECK(s.rope_tables[0].interleaved);
  CHECK(s.rope_tables[0].theta == 500000.0);
  CHECK(s.tie_word_embeddings);
  CHECK(!s.layers[0].attention.qkv_bias);
  j["use_bias"] = true;
  const mt::ModelSpec b = mt::parse_model_spec(j, "cfg.json");
  CHECK((b.layers[0].attention.qkv_bias && b.layers[0].attention.o_bias && b.layers[0].mlp.bias));
}

TEST_CASE("SmolLM3: every fourth layer NoPE, sliding where layer_types says", "[families][dense-families]") {
  json j = dense("SmolLM3ForCausalLM", 8);
  mt::ModelSpec s = mt::parse_model_spec(j, "cfg.json");
  CHECK(s.rope_tables[0].theta == 2000000.0);
  for (size_t i = 0; i < s.layers.size(); ++i) {
    CHECK(s.layers[i].attention.rope == (i % 4 == 3 ? -1 : 0));
    CHECK(s.layers[i].attention.window == 0);
  }
  j["no_rope_layers"] = {1, 0, 1, 1, 1, 1, 0, 1};
  j["use_sliding_window"] = true;
  j["sliding_window"] = 32;
  s = mt::parse_model_spec(j, "cfg.json");
  for (size_t i = 0; i < s.layers.size(); ++i) {
    const bool nope = i == 1 || i == 6;
    CHECK(s.layers[i].attention.rope == (nope ? -1 : 0));
    CHECK(s.layers[i].attention.window == (nope ? 32 : 0));  // the default layer_types slide the NoPE layers
  }
  j["no_rope_layers"] = {1, 0, 1};
  CHECK(parse_error(j) == "model config cfg.json: key 'no_rope_layers' must list 8 flags (num_hidden_layers), got [1,0,1]");
  j["no_rope_layers"] = {1, 0, 1, 1, 1, 1, 2, 1};
  CHECK(parse_error(j) == "model config cfg.json: key 'no_rope_layers' entry 6 must be 0 or 1, got 2");
  j.erase("no_rope_layers");
  j["no_rope_layer_interval"] = 0;
  CHECK(parse_error(j) == "model config cfg.json: key 'no_rope_layer_interval' must be positive, got 0");
}

TEST_CASE("Granite: the four multipliers", "[families][dense-families]") {
  json j = dense("GraniteForCausalLM");
  j["embedding_multiplier"] = 12.0;
  j["residual_multiplier"] = 0.22;
  j["attention_multiplier"] = 0.0078125;
  j["logits_scaling"] = 16.0;
  const mt::ModelSpec s = mt::parse_model_spec(j, "cfg.json");
  CHECK(s.embedding_scale == 12.0);
  CHECK(!s.embedding_scale_in_compute_dtype);
  CHECK(s.logit_scale == 1.0 / 16.0);
  CHECK(s.layers[0].residual_multiplier == 0.22);
  CHECK(s.layers[0].attention.scale == 0.0078125);
  CHECK(mt::describe_layers(s).find("residual × 0.22") != std::string::npos);
  for (const char* key : {"embedding_multiplier", "residual_multiplier", "attention_multiplier", "logits_scaling"}) {
    json bad = j;
    bad[key] = 0.0;
    CHECK(parse_error(bad) == std::string("model config cfg.json: key '") + key + "' must be positive, got 0");
  }
}

TEST_CASE("Hunyuan dense: q/k norm after RoPE under its own names, NTK-alpha RoPE", "[families][dense-families]") {
  json j = dense("HunYuanDenseV1ForCausalLM");
  j["rope_scaling"] = {{"type", "dynamic"}, {"alpha", 1000.0}, {"factor", 1.0}};
  j["rope_theta"] = 10000.0;
  const mt::ModelSpec s = mt::parse_model_spec(j, "cfg.json");
  CHECK(s.layers[0].attention.qk_norm);
  CHECK(s.layers[0].attention.qk_norm_after_rope);
  CHECK(s.rope_tables[0].type == "default");
  CHECK(s.rope_tables[0].theta == Approx(10000.0 * std::pow(1000.0, 16.0 / 14.0)).epsilon(1e-12));
  const auto names = layer_tensors(s, 0);
  CHECK(std::count(names.begin(), names.end(), "self_attn.query_layernorm.weight") == 1);
  CHECK(std::count(names.begin(), names.end(), "self_attn.key_layernorm.weight") == 1);
  j["rope_scaling"]["alpha"] = -1.0;
  CHECK(parse_error(j) == "model config cfg.json: key 'rope_scaling.alpha' must be positive, got -1");
}

TEST_CASE("OLMo 2: norms after each block only, q/k norm over the whole projection", "[families][dense-families]") {
  const mt::ModelSpec s = mt::parse_model_spec(dense("Olmo2ForCausalLM"), "cfg.json");
  CHECK(!s.layers[0].pre_norms);
  CHECK(s.layers[0].post_norms);
  CHECK(s.norm_style == mt::NormStyle::weight_fp32_product);  // Olmo2RMSNorm: (w·x̂).to(dtype)
  CHECK(layer_tensors(s, 0) == std::vector<std::string>{
                                   "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                                   "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                                   "post_attention_layernorm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
                                   "mlp.down_proj.weight", "post_feedforward_layernorm.weight"});
  const mt::ParamLayout layout = mt::make_param_layout(s);
  for (const auto& p : layout.layer(0).params) {
    if (p.hf_name.ends_with("q_norm.weight")) CHECK(p.shape == std::vector<int64_t>{64});  // 4 heads × 16
    if (p.hf_name.ends_with("k_norm.weight")) CHECK(p.shape == std::vector<int64_t>{32});  // 2 kv heads × 16
  }
  CHECK(mt::describe_layers(s).find("q/k norm over the projection") != std::string::npos);
  CHECK(mt::describe_layers(s).find("post-block norms") != std::string::npos);
}

TEST_CASE("OLMo 3: three of four layers slide; per-type RoPE, or rope_theta for the full layers only",
          "[families][dense-families]") {
  json j = dense("Olmo3ForCausalLM", 8);
  j["rope_theta"] = 1000.0;
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  mt::ModelSpec s = mt::parse_model_spec(j, "cfg.json");
  for (size_t i = 0; i < s.layers.size(); ++i) {
    CHECK(s.layers[i].attention.window == (i % 4 == 3 ? 0 : 4096));
    CHECK(s.layers[i].attention.rope == (i % 4 == 3 ? 0 : 1));
  }
  CHECK(s.rope_tables[0].theta == 1000.0);
  CHECK(s.rope_tables[0].type == "linear");
  CHECK(s.rope_tables[1].theta == 500000.0);  // Olmo3Config: the sliding layers' default_theta
  CHECK(s.rope_tables[1].type == "default");
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 7.0}}},
                          {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 9.0}}}};
  s = mt::parse_model_spec(j, "cfg.json");
  CHECK(s.rope_tables[0].theta == 7.0);
  CHECK(s.rope_tables[1].theta == 9.0);
  j["sliding_window"] = nullptr;
  CHECK(parse_error(j) == "model config cfg.json: key 'sliding_window' is null but layer_types marks layer 0 sliding");
}

TEST_CASE("EXAONE 4: post-block norms, per-head q/k norm, global layers without RoPE", "[families][dense-families]") {
  json j = dense("Exaone4ForCausalLM", 8);
  j["sliding_window"] = 64;
  mt::ModelSpec s = mt::parse_model_spec(j, "cfg.json");
  for (size_t i = 0; i < s.layers.size(); ++i) {
    const bool global = i % 4 == 3;
    CHECK(s.layers[i].attention.window == (global ? 0 : 64));
    CHECK(s.layers[i].attention.rope == (global ? -1 : 0));
    CHECK(!s.layers[i].pre_norms);
    CHECK(s.layers[i].attention.qk_norm);
    CHECK(!s.layers[i].attention.qk_norm_whole);
  }
  CHECK(s.norm_style == mt::NormStyle::weight);  // Exaone4RMSNorm is LlamaRMSNorm
  j["layer_types"] = json::array();
  for (int i = 0; i < 8; ++i) j["layer_types"].push_back(i < 4 ? "full_attention" : "sliding_attention");
  j["sliding_window"] = nullptr;  // no window: every layer rotates; a sliding layer is refused
  CHECK(parse_error(j) == "model config cfg.json: key 'sliding_window' is null but layer_types marks layer 4 sliding");
  j.erase("layer_types");
  s = mt::parse_model_spec(j, "cfg.json");
  for (const mt::LayerSpec& l : s.layers) CHECK((l.attention.rope == 0 && l.attention.window == 0));
  j["sliding_window"] = 64;
  j["sliding_window_pattern"] = "LLLG";
  CHECK(parse_error(j) ==
        "model config cfg.json: key 'sliding_window_pattern' is \"LLLG\"; without layer_types it must be an integer");
  j["sliding_window_pattern"] = 0;
  CHECK(parse_error(j) == "model config cfg.json: key 'sliding_window_pattern' must be positive, got 0");
}

TEST_CASE("the shipped shapes of OLMo-2-32B, OLMo-3-7B, Granite-3.3-8B, SmolLM3-3B, Hunyuan-7B, EXAONE-4.0-32B and "
          "Seed-OSS-36B parse to their published sizes and layer kinds", "[families][dense-families]") {
  const auto spec = [](const char* name) {
    return mt::load_model_spec(std::string(MEGATRAIN_SOURCE_DIR "/configs/models/") + name);
  };
  const auto params = [&](const char* name) { return mt::count_parameters(spec(name)); };
  CHECK(params("olmo-2-0325-32b.json") == Approx(32.2e9).epsilon(0.01));
  CHECK(params("olmo-3-1025-7b.json") == Approx(7.298e9).epsilon(0.001));
  CHECK(params("granite-3.3-8b-base.json") == Approx(8.17e9).epsilon(0.01));
  CHECK(params("smollm3-3b.json") == Approx(3.08e9).epsilon(0.01));
  CHECK(params("hunyuan-7b-instruct.json") == Approx(7.5e9).epsilon(0.01));
  CHECK(params("exaone-4.0-32b.json") == Approx(32.0e9).epsilon(0.01));
  CHECK(params("seed-oss-36b-instruct.json") == Approx(36.15e9).epsilon(0.01));
  const mt::ModelSpec olmo3 = spec("olmo-3-1025-7b.json"), exaone = spec("exaone-4.0-32b.json");
  for (int64_t i = 0; i < 8; ++i) {  // three sliding layers, then a full one; EXAONE's full layers without RoPE
    CHECK(olmo3.layers[i].attention.window == (i % 4 == 3 ? 0 : 4096));
    CHECK(exaone.layers[i].attention.window == (i % 4 == 3 ? 0 : 4096));
    CHECK(exaone.layers[i].attention.rope == (i % 4 == 3 ? -1 : 0));
  }
  CHECK(spec("hunyuan-7b-instruct.json").layers[0].attention.qk_norm_after_rope);
}
