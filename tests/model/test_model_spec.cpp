// config.json → ModelSpec: the four families as transformers 5 reads them (biases, head_dim and kv defaults,
// sliding windows, both RoPE formats), and one-line errors naming the config and the key.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "catch.h"
#include "core/error.h"
#include "model/model_spec.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json tiny(const char* architecture) {
  return {{"architectures", {architecture}},
          {"vocab_size", 128},
          {"hidden_size", 64},
          {"intermediate_size", 96},
          {"num_hidden_layers", 4},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"max_position_embeddings", 256}};
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const mt::Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string parse_error(const json& j) {
  return error_of([&] { mt::parse_model_spec(j, "cfg.json"); });
}
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("llama: old rope format, attention_bias covers o_proj, mlp_bias", "[model_spec]") {
  json j = tiny("LlamaForCausalLM");
  j["rms_norm_eps"] = 1e-5;
  j["attention_bias"] = true;
  j["mlp_bias"] = true;
  j["rope_theta"] = 500000.0;
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 64}};
  const mt::ModelSpec s = mt::parse_model_spec(j, "cfg.json");
  CHECK(s.family == mt::ModelFamily::llama);
  CHECK(s.architecture == "LlamaForCausalLM");
  CHECK(s.vocab_size == 128);
  CHECK(s.hidden_size == 64);
  CHECK(s.intermediate_size == 96);
  CHECK(s.num_layers == 4);
  CHECK(s.num_heads == 4);
  CHECK(s.num_kv_heads == 2);
  CHECK(s.head_dim == 16);
  CHECK(s.max_position_embeddings == 256);
  CHECK(s.rms_norm_eps == 1e-5);
  CHECK(s.initializer_range == 0.02);
  CHECK_FALSE(s.tie_word_embeddings);
  CHECK(s.attention_bias);
  CHECK(s.o_proj_bias);
  CHECK(s.mlp_bias);
  CHECK_FALSE(s.qk_norm);
  CHECK(s.sliding_window == std::vector<int64_t>(4, 0));
  CHECK(s.rope.type == "llama3");
  CHECK(s.rope.theta == 500000.0);
  CHECK(s.rope.factor == 8.0);
  CHECK(s.rope.low_freq_factor == 1.0);
  CHECK(s.rope.high_freq_factor == 4.0);
  CHECK(s.rope.original_max_position_embeddings == 64);
  CHECK(mt::family_name(s.family) == "llama");
}

TEST_CASE("llama defaults: kv heads, head_dim, rope, no biases", "[model_spec]") {
  json j = tiny("LlamaForCausalLM");
  j.erase("num_key_value_heads");
  j["head_dim"] = nullptr;
  const mt::ModelSpec s = mt::parse_model_spec(j, "cfg.json");
  CHECK(s.num_kv_heads == 4);
  CHECK(s.head_dim == 16);
  CHECK_FALSE(s.attention_bias);
  CHECK_FALSE(s.o_proj_bias);
  CHECK_FALSE(s.mlp_bias);
  CHECK(s.rope.type == "default");
  CHECK(s.rope.theta == 10000.0);
  CHECK(s.rope.partial_rotary_factor == 1.0);
  CHECK(s.rms_norm_eps == 1e-6);
}

TEST_CASE("qwen2: q/k/v biases always, no o_proj bias; sliding windows", "[model_spec]") {
  json j = tiny("Qwen2ForCausalLM");
  j["attention_bias"] = false;  // Qwen2 ignores it
  j["tie_word_embeddings"] = true;
  j["rope_theta"] = 1000000.0;
  j["sliding_window"] = 32;
  j["max_window_layers"] = 2;

  SECTION("windows off unless use_sliding_window") {
    const mt::ModelSpec s = mt::parse_model_spec(j, "cfg.json");
    CHECK(s.family == mt::ModelFamily::qwen2);
    CHECK(s.attention_bias);
    CHECK_FALSE(s.o_proj_bias);
    CHECK_FALSE(s.mlp_bias);
    CHECK_FALSE(s.qk_norm);
    CHECK(s.tie_word_embeddings);
    CHECK(s.rope.theta == 1000000.0);
    CHECK(s.sliding_window == std::vector<int64_t>(4, 0));
  }
  SECTION("layers from max_window_layers on slide") {
    j["use_sliding_window"] = true;
    CHECK(mt::parse_model_spec(j, "cfg.json").sliding_window == std::vector<int64_t>{0, 0, 32, 32});
  }
  SECTION("layer_types decide when present") {
    j["use_sliding_window"] = true;
    j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention"};
    CHECK(mt::parse_model_spec(j, "cfg.json").sliding_window == std::vector<int64_t>{32, 0, 32, 0});
  }
  SECTION("a null window is full attention") {
    j["use_sliding_window"] = true;
    j["sliding_window"] = nullptr;
    CHECK(mt::parse_model_spec(j, "cfg.json").sliding_window == std::vector<int64_t>(4, 0));
  }
  SECTION("transformers' Qwen2 default of 32 kv heads applies when the key is absent") {
    j.erase("num_key_value_heads");
    const std::string msg = parse_error(j);
    CHECK(has(msg, "cfg.json"));
    CHECK(has(msg, "num_key_value_heads (32)"));
  }
}

TEST_CASE("qwen3: explicit head_dim, qk norm, attention_bias on all four projections, new rope format",
          "[model_spec]") {
  json j = tiny("Qwen3ForCausalLM");
  j["head_dim"] = 32;
  j["attention_bias"] = true;
  j["rope_parameters"] = {{"rope_type", "linear"}, {"rope_theta", 20000.0}, {"factor", 2.0}};
  mt::ModelSpec s = mt::parse_model_spec(j, "cfg.json");
  CHECK(s.family == mt::ModelFamily::qwen3);
  CHECK(s.head_dim == 32);
  CHECK(s.qk_norm);
  CHECK(s.attention_bias);
  CHECK(s.o_proj_bias);
  CHECK_FALSE(s.mlp_bias);
  CHECK(s.rope.type == "linear");
  CHECK(s.rope.theta == 20000.0);
  CHECK(s.rope.factor == 2.0);

  j.erase("head_dim");  // Qwen3Config's default head_dim is 128, not hidden / heads
  CHECK(mt::parse_model_spec(j, "cfg.json").head_dim == 128);
}

TEST_CASE("mistral: one sliding window for every layer; yarn in rope_parameters", "[model_spec]") {
  json j = tiny("MistralForCausalLM");
  j["head_dim"] = nullptr;
  j["sliding_window"] = 4096;
  j["rope_parameters"] = {
      {"rope_type", "yarn"}, {"rope_theta", 1e6}, {"factor", 4.0}, {"original_max_position_embeddings", 64}};
  mt::ModelSpec s = mt::parse_model_spec(j, "cfg.json");
  CHECK(s.family == mt::ModelFamily::mistral);
  CHECK(s.head_dim == 16);
  CHECK_FALSE(s.attention_bias);
  CHECK_FALSE(s.o_proj_bias);
  CHECK(s.sliding_window == std::vector<int64_t>(4, 4096));
  CHECK(s.rope.type == "yarn");
  CHECK(s.rope.theta == 1e6);
  CHECK(s.rope.factor == 4.0);
  CHECK(s.rope.original_max_position_embeddings == 64);
  CHECK(s.rope.beta_fast == 32.0);
  CHECK(s.rope.beta_slow == 1.0);
  CHECK(s.rope.attention_factor == 0.0);  // derived from factor when the table is built
  CHECK(s.rope.truncate);

  j["sliding_window"] = nullptr;
  CHECK(mt::parse_model_spec(j, "cfg.json").sliding_window == std::vector<int64_t>(4, 0));
  j.erase("sliding_window");  // MistralConfig's default
  CHECK(mt::parse_model_spec(j, "cfg.json").sliding_window == std::vector<int64_t>(4, 4096));
}

TEST_CASE("rope parameters: legacy keys, top-level fallbacks, yarn details", "[model_spec]") {
  json j = tiny("LlamaForCausalLM");
  SECTION("legacy 'type' and top-level rope_theta and partial_rotary_factor") {
    j["rope_theta"] = 5000.0;
    j["partial_rotary_factor"] = 0.5;
    j["rope_scaling"] = {{"type", "linear"}, {"factor", 3.0}};
    const mt::ModelSpec s = mt::parse_model_spec(j, "cfg.json");
    CHECK(s.rope.type == "linear");
    CHECK(s.rope.theta == 5000.0);
    CHECK(s.rope.factor == 3.0);
    CHECK(s.rope.partial_rotary_factor == 0.5);
  }
  SECTION("the rope dict wins over top-level keys") {
    j["rope_theta"] = 5000.0;
    j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 7000.0}, {"partial_rotary_factor", 0.25}};
    const mt::ModelSpec s = mt::parse_model_spec(j, "cfg.json");
    CHECK(s.rope.theta == 7000.0);
    CHECK(s.rope.partial_rotary_factor == 0.25);
  }
  SECTION("yarn: mscale / mscale_all_dim, betas, truncate, derived original context") {
    j["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 4.0},  {"mscale", 0.707},  {"mscale_all_dim", 1.0},
                            {"beta_fast", 16},     {"beta_slow", 2}, {"truncate", false}};
    const mt::ModelSpec s = mt::parse_model_spec(j, "cfg.json");
    CHECK(s.rope.original_max_position_embeddings == 256);                 // max_position_embeddings
    CHECK(std::abs(s.rope.attention_factor - 0.964326914892074) < 1e-14);  // transformers' value
    CHECK(s.rope.beta_fast == 16.0);
    CHECK(s.rope.beta_slow == 2.0);
    CHECK_FALSE(s.rope.truncate);
  }
  SECTION("yarn: explicit attention_factor, null factor, top-level original_max_position_embeddings") {
    j["original_max_position_embeddings"] = 32;
    j["rope_parameters"] = {{"rope_type", "yarn"},
                            {"factor", nullptr},
                            {"attention_factor", 1.25},
                            {"original_max_position_embeddings", 128}};
    const mt::ModelSpec s = mt::parse_model_spec(j, "cfg.json");
    CHECK(s.rope.original_max_position_embeddings == 32);
    CHECK(s.rope.factor == 8.0);  // 256 / 32
    CHECK(s.rope.attention_factor == 1.25);
  }
}

TEST_CASE("model_type stands in for missing architectures", "[model_spec]") {
  json j = tiny("x");
  j.erase("architectures");
  j["model_type"] = "qwen3";
  j["head_dim"] = 16;
  const mt::ModelSpec s = mt::parse_model_spec(j, "cfg.json");
  CHECK(s.family == mt::ModelFamily::qwen3);
  CHECK(s.architecture == "Qwen3ForCausalLM");
}

TEST_CASE("invalid configs name the file and the key", "[model_spec]") {
  json j = tiny("LlamaForCausalLM");
  SECTION("unknown architecture lists the supported ones") {
    j["architectures"] = {"GPT2LMHeadModel"};
    const std::string msg = parse_error(j);
    CHECK(has(msg, "cfg.json"));
    CHECK(has(msg, "GPT2LMHeadModel"));
    CHECK(has(msg, "LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, MistralForCausalLM"));
  }
  SECTION("heads not divisible by kv heads") {
    j["num_key_value_heads"] = 3;
    const std::string msg = parse_error(j);
    CHECK(has(msg, "cfg.json"));
    CHECK(has(msg, "num_attention_heads (4)"));
    CHECK(has(msg, "num_key_value_heads (3)"));
  }
  SECTION("unknown rope type") {
    j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
    const std::string msg = parse_error(j);
    CHECK(has(msg, "cfg.json"));
    CHECK(has(msg, "'dynamic'"));
  }
  SECTION("a missing required key") {
    j.erase("hidden_size");
    CHECK(has(parse_error(j), "'hidden_size' is missing"));
  }
  SECTION("a key of the wrong type") {
    j["num_hidden_layers"] = "four";
    CHECK(has(parse_error(j), "'num_hidden_layers' must be an integer"));
  }
  SECTION("a non-positive dimension") {
    j["intermediate_size"] = 0;
    CHECK(has(parse_error(j), "'intermediate_size' must be positive"));
  }
  SECTION("an odd head_dim") {
    j["head_dim"] = 15;
    CHECK(has(parse_error(j), "'head_dim'"));
  }
  SECTION("a scaling rope without its factor") {
    j["rope_parameters"] = {{"rope_type", "linear"}};
    CHECK(has(parse_error(j), "'rope_parameters.factor' is missing"));
  }
  SECTION("an activation other than silu") {
    j["hidden_act"] = "gelu";
    CHECK(has(parse_error(j), "'hidden_act'"));
  }
}

TEST_CASE("load_model_spec keeps the text and names the file in its errors", "[model_spec]") {
  const fs::path dir = fs::temp_directory_path() / ("mt_test_spec_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path good = dir / "config.json", bad = dir / "broken.json";
  const std::string text = tiny("Qwen2ForCausalLM").dump(2);
  std::ofstream(good) << text;
  std::ofstream(bad) << "{\"vocab_size\": 12,,}";

  const mt::ModelSpec s = mt::load_model_spec(good);
  CHECK(s.config_json == text);
  CHECK(s.family == mt::ModelFamily::qwen2);
  // embed + 4 × (2 norms + q,k,v with biases + o + 3 MLP matrices) + final norm + lm_head
  const int64_t layer = 2 * 64 + (64 * 64 + 64) + 2 * (32 * 64 + 32) + 64 * 64 + 3 * 64 * 96;
  CHECK(mt::count_parameters(s) == 128 * 64 + 4 * layer + 64 + 128 * 64);

  const std::string msg = error_of([&] { mt::load_model_spec(bad); });
  CHECK(has(msg, "broken.json"));
  CHECK(has(msg, "not valid JSON"));
  CHECK(has(error_of([&] { mt::load_model_spec(dir / "absent.json"); }), "absent.json"));
  fs::remove_all(dir);
}

TEST_CASE("the golden fixtures' configs parse as documented", "[model_spec]") {
  const fs::path fixtures = fs::path(MEGATRAIN_SOURCE_DIR) / "tests" / "fixtures";
  const mt::ModelSpec llama = mt::load_model_spec(fixtures / "llama" / "model" / "config.json");
  CHECK(llama.rope.type == "llama3");
  CHECK(llama.rope.original_max_position_embeddings == 16);
  CHECK(llama.num_kv_heads == 2);
  const mt::ModelSpec qwen2 = mt::load_model_spec(fixtures / "qwen2" / "model" / "config.json");
  CHECK(qwen2.tie_word_embeddings);
  CHECK(qwen2.attention_bias);
  CHECK(qwen2.sliding_window == std::vector<int64_t>(3, 0));
  const mt::ModelSpec qwen3 = mt::load_model_spec(fixtures / "qwen3" / "model" / "config.json");
  CHECK(qwen3.head_dim == 16);
  CHECK(qwen3.qk_norm);
  CHECK(qwen3.rope.type == "linear");
  const mt::ModelSpec mistral = mt::load_model_spec(fixtures / "mistral" / "model" / "config.json");
  CHECK(mistral.sliding_window == std::vector<int64_t>(3, 5));
  CHECK(mistral.rope.type == "yarn");
  CHECK(mistral.rope.factor == 4.0);
}
