// config.json → ModelSpec: the four families as transformers 5 reads them (biases, head_dim and kv defaults,
// sliding windows, both RoPE formats, longrope and dynamic RoPE) into one LayerSpec per layer, first_layers and
// describe_layers, and one-line errors naming the config and the key.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "catch.h"
#include "core/error.h"
#include "model/families.h"
#include "model/model_spec.h"
#include "model/param_layout.h"

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

mt::ModelSpec parse(const json& j) { return mt::parse_model_spec(j, "cfg.json"); }

// Runs `check` on every layer's spec (one per layer), naming the layer in failures.
template <typename F>
void each_layer(const mt::ModelSpec& s, F&& check) {
  REQUIRE(static_cast<int64_t>(s.layers.size()) == s.num_layers);
  for (size_t i = 0; i < s.layers.size(); ++i) {
    INFO("layer " << i);
    check(s.layers[i]);
  }
}

// Each layer's sliding window (0: full attention).
std::vector<int64_t> windows(const mt::ModelSpec& s) {
  std::vector<int64_t> w;
  for (const mt::LayerSpec& l : s.layers) w.push_back(l.attention.window);
  return w;
}

// The one RoPE table of a dense family, which every layer uses (throws, failing the check, otherwise).
const mt::RopeSpec& rope(const mt::ModelSpec& s) {
  if (s.rope_tables.size() != 1) throw std::logic_error(std::to_string(s.rope_tables.size()) + " rope tables");
  for (const mt::LayerSpec& l : s.layers)
    if (l.attention.rope != 0) throw std::logic_error("a layer uses rope table " + std::to_string(l.attention.rope));
  return s.rope_tables[0];
}

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
  const mt::ModelSpec s = parse(j);
  CHECK(s.family == "llama");
  CHECK(s.architecture == "LlamaForCausalLM");
  CHECK(s.vocab_size == 128);
  CHECK(s.hidden_size == 64);
  CHECK(s.num_layers == 4);
  CHECK(s.max_position_embeddings == 256);
  CHECK(s.rms_norm_eps == 1e-5);
  CHECK(s.initializer_range == 0.02);
  CHECK_FALSE(s.tie_word_embeddings);
  CHECK(s.norm_style == mt::NormStyle::weight);
  CHECK(s.embedding_scale == 1.0);
  CHECK(s.final_logit_softcap == 0.0);
  CHECK_FALSE(s.normalized_head);
  CHECK_FALSE(s.trust_remote_code);
  CHECK(s.names.qkv.empty());
  CHECK(s.names.gate_up.empty());
  each_layer(s, [](const mt::LayerSpec& l) {
    CHECK(l.mlp.intermediate_size == 96);
    CHECK(l.mlp.activation == mt::Activation::silu);
    CHECK(l.attention.num_heads == 4);
    CHECK(l.attention.num_kv_heads == 2);
    CHECK(l.attention.head_dim == 16);
    CHECK(l.attention.scale == 0.25);  // 1/sqrt(head_dim)
    CHECK(l.attention.softcap == 0.0);
    CHECK_FALSE(l.attention.alibi);
    CHECK(l.attention.qkv_bias);
    CHECK(l.attention.o_bias);
    CHECK(l.mlp.bias);
    CHECK_FALSE(l.attention.qk_norm);
    CHECK(l.attention.window == 0);
    CHECK_FALSE(l.post_norms);
  });
  const mt::RopeSpec& r = rope(s);
  CHECK(r.type == "llama3");
  CHECK(r.theta == 500000.0);
  CHECK(r.factor == 8.0);
  CHECK(r.low_freq_factor == 1.0);
  CHECK(r.high_freq_factor == 4.0);
  CHECK(r.original_max_position_embeddings == 64);
  CHECK(r.head_dim == 16);
  CHECK(r.rot_dim() == 16);
  CHECK_FALSE(r.interleaved);
  CHECK_FALSE(r.depends_on_length());
}

TEST_CASE("llama defaults: kv heads, head_dim, rope, no biases", "[model_spec]") {
  json j = tiny("LlamaForCausalLM");
  j.erase("num_key_value_heads");
  j["head_dim"] = nullptr;
  const mt::ModelSpec s = parse(j);
  each_layer(s, [](const mt::LayerSpec& l) {
    CHECK(l.attention.num_kv_heads == 4);
    CHECK(l.attention.head_dim == 16);
    CHECK_FALSE(l.attention.qkv_bias);
    CHECK_FALSE(l.attention.o_bias);
    CHECK_FALSE(l.mlp.bias);
  });
  const mt::RopeSpec& r = rope(s);
  CHECK(r.type == "default");
  CHECK(r.theta == 10000.0);
  CHECK(r.partial_rotary_factor == 1.0);
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
    const mt::ModelSpec s = parse(j);
    CHECK(s.family == "qwen2");
    each_layer(s, [](const mt::LayerSpec& l) {
      CHECK(l.attention.qkv_bias);
      CHECK_FALSE(l.attention.o_bias);
      CHECK_FALSE(l.mlp.bias);
      CHECK_FALSE(l.attention.qk_norm);
    });
    CHECK(s.tie_word_embeddings);
    CHECK(rope(s).theta == 1000000.0);
    CHECK(windows(s) == std::vector<int64_t>(4, 0));
  }
  SECTION("layers from max_window_layers on slide") {
    j["use_sliding_window"] = true;
    CHECK(windows(parse(j)) == std::vector<int64_t>{0, 0, 32, 32});
  }
  SECTION("layer_types decide when present") {
    j["use_sliding_window"] = true;
    j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention"};
    CHECK(windows(parse(j)) == std::vector<int64_t>{32, 0, 32, 0});
  }
  SECTION("layer_types of the wrong length are refused, naming the key") {
    j["use_sliding_window"] = true;
    j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention"};
    const std::string msg = parse_error(j);
    CHECK(has(msg, "cfg.json"));
    CHECK(has(msg, "'layer_types'"));
    CHECK(has(msg, "must list 4 layer types"));
    CHECK(has(msg, "got 3"));
  }
  SECTION("layer_types that are not a list are refused, naming the key") {
    j["use_sliding_window"] = true;
    j["layer_types"] = "sliding_attention";
    const std::string msg = parse_error(j);
    CHECK(has(msg, "'layer_types'"));
    CHECK(has(msg, "\"sliding_attention\""));
  }
  SECTION("an unknown layer_types entry is refused, naming the key and the entry") {
    j["use_sliding_window"] = true;
    j["layer_types"] = {"full_attention", "full_attention", "linear_attention", "full_attention"};
    const std::string msg = parse_error(j);
    CHECK(has(msg, "cfg.json"));
    CHECK(has(msg, "'layer_types' entry 2"));
    CHECK(has(msg, "linear_attention"));
  }
  SECTION("a null window is full attention") {
    j["use_sliding_window"] = true;
    j["sliding_window"] = nullptr;
    CHECK(windows(parse(j)) == std::vector<int64_t>(4, 0));
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
  mt::ModelSpec s = parse(j);
  CHECK(s.family == "qwen3");
  each_layer(s, [](const mt::LayerSpec& l) {
    CHECK(l.attention.head_dim == 32);
    CHECK(l.attention.q_dim() == 128);
    CHECK(l.attention.kv_dim() == 64);
    CHECK(l.attention.qk_norm);
    CHECK(l.attention.qkv_bias);
    CHECK(l.attention.o_bias);
    CHECK_FALSE(l.mlp.bias);
  });
  CHECK(rope(s).type == "linear");
  CHECK(rope(s).theta == 20000.0);
  CHECK(rope(s).factor == 2.0);
  CHECK(rope(s).head_dim == 32);

  j.erase("head_dim");  // Qwen3Config's default head_dim is 128, not hidden / heads
  s = parse(j);
  each_layer(s, [](const mt::LayerSpec& l) { CHECK(l.attention.head_dim == 128); });
  CHECK(rope(s).head_dim == 128);
}

TEST_CASE("mistral: one sliding window for every layer; yarn in rope_parameters", "[model_spec]") {
  json j = tiny("MistralForCausalLM");
  j["max_position_embeddings"] = 8192;  // room for the windows below
  j["head_dim"] = nullptr;
  j["sliding_window"] = 4096;
  j["rope_parameters"] = {
      {"rope_type", "yarn"}, {"rope_theta", 1e6}, {"factor", 4.0}, {"original_max_position_embeddings", 64}};
  mt::ModelSpec s = parse(j);
  CHECK(s.family == "mistral");
  each_layer(s, [](const mt::LayerSpec& l) {
    CHECK(l.attention.head_dim == 16);
    CHECK_FALSE(l.attention.qkv_bias);
    CHECK_FALSE(l.attention.o_bias);
  });
  CHECK(windows(s) == std::vector<int64_t>(4, 4096));
  const mt::RopeSpec& r = rope(s);
  CHECK(r.type == "yarn");
  CHECK(r.theta == 1e6);
  CHECK(r.factor == 4.0);
  CHECK(r.original_max_position_embeddings == 64);
  CHECK(r.beta_fast == 32.0);
  CHECK(r.beta_slow == 1.0);
  CHECK(r.attention_factor == 0.0);  // derived from factor when the table is built
  CHECK(r.truncate);

  j["sliding_window"] = nullptr;
  CHECK(windows(parse(j)) == std::vector<int64_t>(4, 0));
  j.erase("sliding_window");  // MistralConfig's default
  CHECK(windows(parse(j)) == std::vector<int64_t>(4, 4096));
}

TEST_CASE("sliding windows: one longer than max_position_embeddings is kept (published Phi-3 128k configs have "
          "262144 over 131072), a non-positive one is refused", "[model_spec]") {
  SECTION("longer than the context: kept as transformers keeps it") {
    json j = tiny("MistralForCausalLM");
    j["sliding_window"] = 512;
    CHECK(windows(parse(j)) == std::vector<int64_t>(4, 512));
  }
  SECTION("a non-positive window is refused naming the key") {
    json j = tiny("MistralForCausalLM");
    j["sliding_window"] = 0;
    CHECK(has(parse_error(j), "'sliding_window' must be positive"));
  }
}

TEST_CASE("rope parameters: legacy keys, top-level fallbacks, yarn details", "[model_spec]") {
  json j = tiny("LlamaForCausalLM");
  SECTION("legacy 'type' and top-level rope_theta and partial_rotary_factor") {
    j["rope_theta"] = 5000.0;
    j["partial_rotary_factor"] = 0.5;
    j["rope_scaling"] = {{"type", "linear"}, {"factor", 3.0}};
    const mt::ModelSpec s = parse(j);
    const mt::RopeSpec& r = rope(s);
    CHECK(r.type == "linear");
    CHECK(r.theta == 5000.0);
    CHECK(r.factor == 3.0);
    CHECK(r.partial_rotary_factor == 0.5);
    CHECK(r.rot_dim() == 8);
  }
  SECTION("the rope dict wins over top-level keys") {
    j["rope_theta"] = 5000.0;
    j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 7000.0}, {"partial_rotary_factor", 0.25}};
    const mt::ModelSpec s = parse(j);
    CHECK(rope(s).theta == 7000.0);
    CHECK(rope(s).partial_rotary_factor == 0.25);
    CHECK(rope(s).rot_dim() == 4);
  }
  SECTION("yarn: mscale / mscale_all_dim, betas, truncate, derived original context") {
    j["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 4.0},  {"mscale", 0.707},  {"mscale_all_dim", 1.0},
                            {"beta_fast", 16},     {"beta_slow", 2}, {"truncate", false}};
    const mt::ModelSpec s = parse(j);
    const mt::RopeSpec& r = rope(s);
    CHECK(r.original_max_position_embeddings == 256);                 // max_position_embeddings
    CHECK(std::abs(r.attention_factor - 0.964326914892074) < 1e-14);  // transformers' value
    CHECK(r.beta_fast == 16.0);
    CHECK(r.beta_slow == 2.0);
    CHECK_FALSE(r.truncate);
  }
  SECTION("yarn: explicit attention_factor, null factor, top-level original_max_position_embeddings") {
    j["original_max_position_embeddings"] = 32;
    j["rope_parameters"] = {{"rope_type", "yarn"},
                            {"factor", nullptr},
                            {"attention_factor", 1.25},
                            {"original_max_position_embeddings", 128}};
    const mt::ModelSpec s = parse(j);
    const mt::RopeSpec& r = rope(s);
    CHECK(r.original_max_position_embeddings == 32);
    CHECK(r.factor == 8.0);  // 256 / 32
    CHECK(r.attention_factor == 1.25);
  }
}

TEST_CASE("longrope: short and long factors, the original length, the attention factor", "[model_spec]") {
  json j = tiny("LlamaForCausalLM");  // head_dim 16: 8 factors
  j["max_position_embeddings"] = 1024;
  const std::vector<double> short_factor = {1.0, 1.0, 1.1, 1.2, 1.5, 2.0, 2.5, 3.0};
  const std::vector<double> long_factor = {1.0, 1.5, 2.0, 4.0, 8.0, 12.0, 16.0, 24.0};
  const auto derived = [](double factor, double original) {
    return std::sqrt(1.0 + std::log(factor) / std::log(original));
  };
  SECTION("Phi-3: a top-level original length; factor is max_position_embeddings over it") {
    j["original_max_position_embeddings"] = 256;
    j["rope_scaling"] = {{"type", "longrope"}, {"short_factor", short_factor}, {"long_factor", long_factor}};
    const mt::ModelSpec s = parse(j);
    const mt::RopeSpec& r = rope(s);
    CHECK(r.type == "longrope");
    CHECK(r.short_factor == short_factor);
    CHECK(r.long_factor == long_factor);
    CHECK(r.original_max_position_embeddings == 256);
    CHECK(r.factor == 4.0);
    CHECK(std::abs(r.attention_factor - derived(4.0, 256.0)) < 1e-15);
    CHECK(r.depends_on_length());
  }
  SECTION("the original length in the dict") {
    j["rope_parameters"] = {{"rope_type", "longrope"},
                            {"short_factor", short_factor},
                            {"long_factor", long_factor},
                            {"original_max_position_embeddings", 512}};
    const mt::ModelSpec s = parse(j);
    const mt::RopeSpec& r = rope(s);
    CHECK(r.original_max_position_embeddings == 512);
    CHECK(r.factor == 2.0);
    CHECK(std::abs(r.attention_factor - derived(2.0, 512.0)) < 1e-15);
  }
  SECTION("a factor in the dict wins over the ratio (transformers' factor default)") {
    j["original_max_position_embeddings"] = 256;
    j["rope_parameters"] = {
        {"rope_type", "longrope"}, {"short_factor", short_factor}, {"long_factor", long_factor}, {"factor", 8.0}};
    const mt::ModelSpec s = parse(j);
    const mt::RopeSpec& r = rope(s);
    CHECK(r.original_max_position_embeddings == 256);
    CHECK(r.factor == 8.0);
    CHECK(std::abs(r.attention_factor - derived(8.0, 256.0)) < 1e-15);
  }
  SECTION("no original length: it is max_position_embeddings and the factor comes from the dict") {
    j["rope_parameters"] = {
        {"rope_type", "longrope"}, {"short_factor", short_factor}, {"long_factor", long_factor}, {"factor", 2.0}};
    const mt::ModelSpec s = parse(j);
    const mt::RopeSpec& r = rope(s);
    CHECK(r.original_max_position_embeddings == 1024);
    CHECK(r.factor == 2.0);
    CHECK(std::abs(r.attention_factor - derived(2.0, 1024.0)) < 1e-15);
  }
  SECTION("a factor of at most 1 scales nothing") {
    j["rope_parameters"] = {{"rope_type", "longrope"}, {"short_factor", short_factor}, {"long_factor", long_factor}};
    const mt::ModelSpec s = parse(j);
    const mt::RopeSpec& r = rope(s);
    CHECK(r.factor == 1.0);
    CHECK(r.attention_factor == 1.0);
  }
  SECTION("an explicit attention_factor") {
    j["original_max_position_embeddings"] = 256;
    j["rope_parameters"] = {{"rope_type", "longrope"},
                            {"short_factor", short_factor},
                            {"long_factor", long_factor},
                            {"attention_factor", 1.5}};
    const mt::ModelSpec s = parse(j);
    CHECK(rope(s).attention_factor == 1.5);
  }
  SECTION("partial rotary: one factor per rotated pair") {
    j["partial_rotary_factor"] = 0.5;
    j["rope_parameters"] = {{"rope_type", "longrope"},
                            {"short_factor", std::vector<double>(short_factor.begin(), short_factor.begin() + 4)},
                            {"long_factor", std::vector<double>(long_factor.begin(), long_factor.begin() + 4)}};
    const mt::ModelSpec s = parse(j);
    CHECK(rope(s).rot_dim() == 8);
  }
  SECTION("a missing factor list is refused naming the key") {
    j["rope_scaling"] = {{"type", "longrope"}, {"long_factor", long_factor}};
    CHECK(has(parse_error(j), "'rope_scaling.short_factor' is missing"));
  }
  SECTION("a factor list of the wrong length is refused") {
    j["rope_scaling"] = {{"type", "longrope"},
                         {"short_factor", short_factor},
                         {"long_factor", std::vector<double>(long_factor.begin(), long_factor.begin() + 7)}};
    const std::string msg = parse_error(j);
    CHECK(has(msg, "cfg.json"));
    CHECK(has(msg, "short_factor and long_factor must have 8 entries"));
    CHECK(has(msg, "got 7"));
  }
  SECTION("a factor list with a non-number is refused naming the key") {
    j["rope_scaling"] = {{"type", "longrope"}, {"short_factor", short_factor}, {"long_factor", {1, 2, "x"}}};
    CHECK(has(parse_error(j), "'rope_scaling.long_factor' must be a list of numbers"));
  }
}

TEST_CASE("dynamic: NTK scaling from max_position_embeddings, factor required", "[model_spec]") {
  json j = tiny("LlamaForCausalLM");
  SECTION("old format") {
    j["rope_theta"] = 5000.0;
    j["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}};
    const mt::ModelSpec s = parse(j);
    const mt::RopeSpec& r = rope(s);
    CHECK(r.type == "dynamic");
    CHECK(r.theta == 5000.0);
    CHECK(r.factor == 2.0);
    CHECK(r.original_max_position_embeddings == 256);  // the length it grows from: max_position_embeddings
    CHECK(r.depends_on_length());
  }
  SECTION("new format; an original length elsewhere does not move it") {
    j["original_max_position_embeddings"] = 64;
    j["rope_parameters"] = {{"rope_type", "dynamic"}, {"rope_theta", 1e4}, {"factor", 4.0}};
    const mt::ModelSpec s = parse(j);
    const mt::RopeSpec& r = rope(s);
    CHECK(r.factor == 4.0);
    CHECK(r.original_max_position_embeddings == 256);
  }
  SECTION("without its factor") {
    j["rope_scaling"] = {{"rope_type", "dynamic"}};
    CHECK(has(parse_error(j), "'rope_scaling.factor' is missing"));
  }
  SECTION("with a non-positive factor") {
    j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 0.0}};
    CHECK(has(parse_error(j), "'rope_scaling.factor' must be positive"));
  }
}

TEST_CASE("model_type stands in for missing architectures", "[model_spec]") {
  json j = tiny("x");
  j.erase("architectures");
  j["model_type"] = "qwen3";
  j["head_dim"] = 16;
  const mt::ModelSpec s = parse(j);
  CHECK(s.family == "qwen3");
  CHECK(s.architecture == "Qwen3ForCausalLM");
}

TEST_CASE("invalid configs name the file and the key", "[model_spec]") {
  json j = tiny("LlamaForCausalLM");
  SECTION("unknown architecture lists the supported ones") {
    j["architectures"] = {"GPT2LMHeadModel"};
    const std::string msg = parse_error(j);
    CHECK(has(msg, "cfg.json"));
    CHECK(has(msg, "GPT2LMHeadModel"));
    std::string supported;
    for (const mt::FamilyEntry& f : mt::model_families())
      supported += (supported.empty() ? "" : ", ") + std::string(f.architecture);
    CHECK(has(supported, "LlamaForCausalLM"));
    CHECK(has(supported, "Qwen2ForCausalLM"));
    CHECK(has(supported, "Qwen3ForCausalLM"));
    CHECK(has(supported, "MistralForCausalLM"));
    CHECK(has(msg, "(supported: " + supported + ")"));
  }
  SECTION("heads not divisible by kv heads") {
    j["num_key_value_heads"] = 3;
    const std::string msg = parse_error(j);
    CHECK(has(msg, "cfg.json"));
    CHECK(has(msg, "num_attention_heads (4)"));
    CHECK(has(msg, "num_key_value_heads (3)"));
  }
  SECTION("unknown rope type") {
    j["rope_scaling"] = {{"rope_type", "mrope"}, {"factor", 2.0}};
    const std::string msg = parse_error(j);
    CHECK(has(msg, "cfg.json"));
    CHECK(has(msg, "'mrope'"));
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
  SECTION("an activation other than silu and tanh-GELU") {
    j["hidden_act"] = "gelu";
    CHECK(has(parse_error(j), "'hidden_act'"));
  }
}

TEST_CASE("hidden_act gelu_pytorch_tanh gives every layer a GeGLU MLP", "[model_spec]") {
  json j = tiny("LlamaForCausalLM");
  j["hidden_act"] = "gelu_pytorch_tanh";
  each_layer(parse(j), [](const mt::LayerSpec& l) { CHECK(l.mlp.activation == mt::Activation::gelu_tanh); });
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
  CHECK(s.family == "qwen2");
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
  CHECK(rope(llama).type == "llama3");
  CHECK(rope(llama).original_max_position_embeddings == 16);
  each_layer(llama, [](const mt::LayerSpec& l) { CHECK(l.attention.num_kv_heads == 2); });
  const mt::ModelSpec qwen2 = mt::load_model_spec(fixtures / "qwen2" / "model" / "config.json");
  CHECK(qwen2.tie_word_embeddings);
  each_layer(qwen2, [](const mt::LayerSpec& l) { CHECK(l.attention.qkv_bias); });
  CHECK(windows(qwen2) == std::vector<int64_t>(3, 0));
  const mt::ModelSpec qwen3 = mt::load_model_spec(fixtures / "qwen3" / "model" / "config.json");
  each_layer(qwen3, [](const mt::LayerSpec& l) {
    CHECK(l.attention.head_dim == 16);
    CHECK(l.attention.qk_norm);
  });
  CHECK(rope(qwen3).type == "linear");
  const mt::ModelSpec mistral = mt::load_model_spec(fixtures / "mistral" / "model" / "config.json");
  CHECK(windows(mistral) == std::vector<int64_t>(3, 5));
  CHECK(rope(mistral).type == "yarn");
  CHECK(rope(mistral).factor == 4.0);
}

TEST_CASE("first_layers cuts the model to its first layers, their specs unchanged", "[model_spec]") {
  json j = tiny("Qwen2ForCausalLM");
  j["use_sliding_window"] = true;
  j["sliding_window"] = 32;
  j["max_window_layers"] = 2;
  const mt::ModelSpec s = parse(j);
  REQUIRE(windows(s) == std::vector<int64_t>{0, 0, 32, 32});

  const mt::ModelSpec cut = mt::first_layers(s, 3);
  CHECK(cut.num_layers == 3);
  CHECK(cut.layers.size() == 3);
  CHECK(windows(cut) == std::vector<int64_t>{0, 0, 32});
  each_layer(cut, [](const mt::LayerSpec& l) {
    CHECK(l.attention.num_heads == 4);
    CHECK(l.attention.num_kv_heads == 2);
    CHECK(l.attention.qkv_bias);
    CHECK(l.mlp.intermediate_size == 96);
  });
  CHECK(cut.architecture == s.architecture);
  CHECK(cut.family == s.family);
  CHECK(cut.vocab_size == s.vocab_size);
  CHECK(cut.hidden_size == s.hidden_size);
  CHECK(cut.tie_word_embeddings == s.tie_word_embeddings);
  CHECK(cut.names.layer_prefix == s.names.layer_prefix);
  REQUIRE(cut.rope_tables.size() == s.rope_tables.size());
  CHECK(cut.rope_tables[0].theta == s.rope_tables[0].theta);
  CHECK(cut.rope_tables[0].head_dim == s.rope_tables[0].head_dim);
  CHECK_NOTHROW(mt::validate_model_spec(cut, "cut"));

  const mt::ParamLayout full = mt::make_param_layout(s), part = mt::make_param_layout(cut);
  CHECK(part.regions.size() == 5);
  CHECK(mt::count_parameters(cut) == mt::count_parameters(s) - full.layer(3).numel);
  for (int64_t i = 0; i < 3; ++i) CHECK(part.layer(i).numel == full.layer(i).numel);

  CHECK(mt::first_layers(s, 4).layers.size() == 4);
  CHECK(mt::first_layers(s, 1).layers.size() == 1);
  CHECK_THROWS_AS(mt::first_layers(s, 0), mt::Error);
  CHECK_THROWS_AS(mt::first_layers(s, 5), mt::Error);
}

TEST_CASE("describe_layers names each run of equal layers once", "[model_spec]") {
  SECTION("one kind") {
    CHECK(mt::describe_layers(parse(tiny("LlamaForCausalLM"))) == "attention 4/2 heads × 16, MLP 96 silu ×4");
  }
  SECTION("full layers, then sliding ones") {
    json j = tiny("Qwen2ForCausalLM");
    j["use_sliding_window"] = true;
    j["sliding_window"] = 32;
    j["max_window_layers"] = 2;
    CHECK(mt::describe_layers(parse(j)) ==
          "attention 4/2 heads × 16, MLP 96 silu ×2; attention 4/2 heads × 16, window 32, MLP 96 silu ×2");
  }
  SECTION("alternating kinds are not merged") {
    json j = tiny("Qwen2ForCausalLM");
    j["use_sliding_window"] = true;
    j["sliding_window"] = 8;
    j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "sliding_attention"};
    const std::string sliding = "attention 4/2 heads × 16, window 8, MLP 96 silu";
    const std::string full = "attention 4/2 heads × 16, MLP 96 silu";
    CHECK(mt::describe_layers(parse(j)) == sliding + " ×1; " + full + " ×1; " + sliding + " ×2");
  }
  SECTION("ALiBi, NoPE, a second rope table, soft-cap, GeGLU and sandwich norms") {
    mt::ModelSpec s = parse(tiny("LlamaForCausalLM"));
    s.rope_tables.push_back(s.rope_tables[0]);
    s.layers[0].attention.rope = -1;
    s.layers[0].attention.alibi = true;
    s.layers[1].attention.rope = -1;
    for (size_t i : {2, 3}) {
      s.layers[i].attention.rope = 1;
      s.layers[i].attention.softcap = 50.0;
      s.layers[i].mlp.activation = mt::Activation::gelu_tanh;
      s.layers[i].post_norms = true;
    }
    CHECK(mt::describe_layers(s) ==
          "attention 4/2 heads × 16, ALiBi, MLP 96 silu ×1; attention 4/2 heads × 16, NoPE, MLP 96 silu ×1; "
          "attention 4/2 heads × 16, rope table 1, soft-cap 50, MLP 96 gelu_tanh, sandwich norms ×2");
  }
}

TEST_CASE("validate_model_spec refuses layer specs that do not fit the model", "[model_spec]") {
  mt::ModelSpec s = parse(tiny("LlamaForCausalLM"));
  CHECK_NOTHROW(mt::validate_model_spec(s, "spec"));
  SECTION("a missing layer spec") {
    s.layers.pop_back();
    CHECK(has(error_of([&] { mt::validate_model_spec(s, "spec"); }), "3 layer specs for 4 layers"));
  }
  SECTION("a rope index past the tables") {
    s.layers[2].attention.rope = 1;
    CHECK(has(error_of([&] { mt::validate_model_spec(s, "spec"); }), "layer 2 names rope table 1 of 1"));
  }
  SECTION("a rope table for another head_dim") {
    s.rope_tables[0].head_dim = 32;
    CHECK(has(error_of([&] { mt::validate_model_spec(s, "spec"); }), "rope table is for another head_dim"));
  }
  SECTION("a layer without an MLP width") {
    s.layers[1].mlp.intermediate_size = 0;
    CHECK(has(error_of([&] { mt::validate_model_spec(s, "spec"); }), "layer 1 has no MLP width"));
  }
}
