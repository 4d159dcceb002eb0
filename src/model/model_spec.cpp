// config.json → ModelSpec for the Llama, Qwen2, Qwen3 and Mistral families, read as transformers 5 reads it
// (same defaults, biases, sliding windows and RoPE parameters, old rope_scaling and new rope_parameters formats).
// Invariant: a returned ModelSpec passed every check below; every rejection names the config and the key.
#include "model/model_spec.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "model/param_layout.h"

namespace mt {
namespace {

using json = nlohmann::json;

struct FamilyInfo {
  ModelFamily family;
  const char* architecture;
  const char* model_type;
  int64_t default_max_positions;  // transformers' config class defaults
  int64_t default_kv_heads;       // 0: num_attention_heads
  int64_t default_head_dim;       // 0: hidden_size / num_attention_heads
};
constexpr FamilyInfo kFamilies[] = {
    {ModelFamily::llama, "LlamaForCausalLM", "llama", 2048, 0, 0},
    {ModelFamily::qwen2, "Qwen2ForCausalLM", "qwen2", 32768, 32, 0},
    {ModelFamily::qwen3, "Qwen3ForCausalLM", "qwen3", 32768, 32, 128},
    {ModelFamily::mistral, "MistralForCausalLM", "mistral", 131072, 0, 0},
};
constexpr const char* kSupported = "LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, MistralForCausalLM";

// Typed access to one JSON object; absent and null keys both take the default.
struct Keys {
  const json& j;
  const std::string& origin;
  const char* where;  // "" at top level, "rope_parameters." inside the rope dict

  bool has(const char* key) const { return j.contains(key) && !j.at(key).is_null(); }
  int64_t integer(const char* key) const {
    MT_REQUIRE(has(key), "model config {}: required key '{}{}' is missing", origin, where, key);
    const json& v = j.at(key);
    MT_REQUIRE(v.is_number_integer(), "model config {}: key '{}{}' must be an integer, got {}", origin, where, key,
               v.dump());
    return v.get<int64_t>();
  }
  int64_t integer(const char* key, int64_t fallback) const { return has(key) ? integer(key) : fallback; }
  double number(const char* key) const {
    MT_REQUIRE(has(key), "model config {}: required key '{}{}' is missing", origin, where, key);
    const json& v = j.at(key);
    MT_REQUIRE(v.is_number(), "model config {}: key '{}{}' must be a number, got {}", origin, where, key, v.dump());
    return v.get<double>();
  }
  double number(const char* key, double fallback) const { return has(key) ? number(key) : fallback; }
  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& v = j.at(key);
    MT_REQUIRE(v.is_boolean(), "model config {}: key '{}{}' must be true or false, got {}", origin, where, key,
               v.dump());
    return v.get<bool>();
  }
  std::string string(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    const json& v = j.at(key);
    MT_REQUIRE(v.is_string(), "model config {}: key '{}{}' must be a string, got {}", origin, where, key, v.dump());
    return v.get<std::string>();
  }
};

const FamilyInfo& detect_family(const Keys& top) {
  if (top.has("architectures")) {
    const json& archs = top.j.at("architectures");
    MT_REQUIRE(archs.is_array() && !archs.empty() && archs[0].is_string(),
               "model config {}: key 'architectures' must be a non-empty list of names", top.origin);
    const auto name = archs[0].get<std::string>();
    for (const auto& f : kFamilies)
      if (name == f.architecture) return f;
    MT_REQUIRE(false, "model config {}: architecture '{}' is not supported (supported: {})", top.origin, name,
               kSupported);
  }
  const std::string type = top.string("model_type", "");
  for (const auto& f : kFamilies)
    if (type == f.model_type) return f;
  MT_REQUIRE(false, "model config {}: model_type '{}' is not supported and no architectures are given (supported: {})",
             top.origin, type, kSupported);
  return kFamilies[0];
}

// transformers' RotaryEmbeddingConfigMixin: `rope_scaling` (old) or `rope_parameters` (new), with top-level
// rope_theta / partial_rotary_factor / original_max_position_embeddings filling what the dict lacks.
RopeSpec parse_rope(const Keys& top, int64_t max_positions) {
  const char* dict_key = top.has("rope_scaling") ? "rope_scaling" : "rope_parameters";
  static const json empty = json::object();
  const json& dict = top.has(dict_key) ? top.j.at(dict_key) : empty;
  MT_REQUIRE(dict.is_object(), "model config {}: key '{}' must be an object", top.origin, dict_key);
  MT_REQUIRE(!dict.contains("full_attention") && !dict.contains("sliding_attention"),
             "model config {}: per-layer-type '{}' are not supported", top.origin, dict_key);
  const std::string where = std::string(dict_key) + ".";
  const Keys r{dict, top.origin, where.c_str()};

  RopeSpec rope;
  rope.type = r.string("rope_type", r.string("type", "default"));
  rope.theta = r.number("rope_theta", top.number("rope_theta", 10000.0));
  rope.partial_rotary_factor = r.number("partial_rotary_factor", top.number("partial_rotary_factor", 1.0));
  const auto original_max = [&] {
    return top.has("original_max_position_embeddings") ? top.integer("original_max_position_embeddings")
                                                       : r.integer("original_max_position_embeddings", max_positions);
  };
  if (rope.type == "default") {
  } else if (rope.type == "linear") {
    rope.factor = r.number("factor");
  } else if (rope.type == "llama3") {
    rope.factor = r.number("factor");
    rope.low_freq_factor = r.number("low_freq_factor");
    rope.high_freq_factor = r.number("high_freq_factor");
    rope.original_max_position_embeddings = original_max();
    MT_REQUIRE(rope.high_freq_factor > rope.low_freq_factor,
               "model config {}: key '{}high_freq_factor' must exceed low_freq_factor", top.origin, where);
  } else if (rope.type == "yarn") {
    rope.original_max_position_embeddings = original_max();
    MT_REQUIRE(rope.original_max_position_embeddings > 0,
               "model config {}: key '{}original_max_position_embeddings' must be positive", top.origin, where);
    rope.factor = r.number(
        "factor", static_cast<double>(max_positions) / static_cast<double>(rope.original_max_position_embeddings));
    const double beta_fast = r.number("beta_fast", 0.0), beta_slow = r.number("beta_slow", 0.0);
    rope.beta_fast = beta_fast != 0.0 ? beta_fast : 32.0;  // transformers: `get("beta_fast") or 32`
    rope.beta_slow = beta_slow != 0.0 ? beta_slow : 1.0;
    rope.truncate = r.boolean("truncate", true);
    const double mscale = r.number("mscale", 0.0), mscale_all_dim = r.number("mscale_all_dim", 0.0);
    const auto get_mscale = [&](double m) { return rope.factor <= 1.0 ? 1.0 : 0.1 * m * std::log(rope.factor) + 1.0; };
    if (r.has("attention_factor"))
      rope.attention_factor = r.number("attention_factor");
    else if (mscale != 0.0 && mscale_all_dim != 0.0)
      rope.attention_factor = get_mscale(mscale) / get_mscale(mscale_all_dim);
    MT_REQUIRE(rope.attention_factor >= 0.0, "model config {}: key '{}attention_factor' must not be negative",
               top.origin, where);
  } else {
    MT_REQUIRE(false, "model config {}: rope type '{}' is not supported (supported: default, linear, llama3, yarn)",
               top.origin, rope.type);
  }
  MT_REQUIRE(rope.theta > 0.0, "model config {}: key 'rope_theta' must be positive", top.origin);
  MT_REQUIRE(rope.factor > 0.0, "model config {}: key '{}factor' must be positive", top.origin, where);
  MT_REQUIRE(rope.type != "llama3" || rope.original_max_position_embeddings > 0,
             "model config {}: key '{}original_max_position_embeddings' must be positive", top.origin, where);
  MT_REQUIRE(rope.partial_rotary_factor > 0.0 && rope.partial_rotary_factor <= 1.0,
             "model config {}: key 'partial_rotary_factor' must be in (0, 1]", top.origin);
  return rope;
}

// Per-layer sliding windows as the family's attention layers see them (0 = full causal attention).
std::vector<int64_t> parse_sliding_windows(const Keys& top, ModelFamily family, int64_t num_layers) {
  std::vector<int64_t> windows(static_cast<size_t>(num_layers), 0);
  if (family == ModelFamily::llama) return windows;
  const bool uses_window = family == ModelFamily::mistral || top.boolean("use_sliding_window", false);
  const bool null_window = top.j.contains("sliding_window") && top.j.at("sliding_window").is_null();
  if (!uses_window || null_window) return windows;
  const int64_t window = top.integer("sliding_window", 4096);
  MT_REQUIRE(window > 0, "model config {}: key 'sliding_window' must be positive or null", top.origin);
  if (family == ModelFamily::mistral) return std::vector<int64_t>(windows.size(), window);

  if (top.has("layer_types")) {
    const json& types = top.j.at("layer_types");
    MT_REQUIRE(types.is_array() && static_cast<int64_t>(types.size()) == num_layers,
               "model config {}: key 'layer_types' must list {} layer types", top.origin, num_layers);
    for (size_t i = 0; i < windows.size(); ++i) {
      const bool sliding = types[i] == "sliding_attention";
      MT_REQUIRE(sliding || types[i] == "full_attention",
                 "model config {}: key 'layer_types' entry {} must be full_attention or sliding_attention, got {}",
                 top.origin, i, types[i].dump());
      windows[i] = sliding ? window : 0;
    }
    return windows;
  }
  const int64_t first = top.integer("max_window_layers", 28);
  for (int64_t i = std::max<int64_t>(first, 0); i < num_layers; ++i) windows[static_cast<size_t>(i)] = window;
  return windows;
}

}  // namespace

ModelSpec parse_model_spec(const json& config, const std::string& origin) {
  MT_REQUIRE(config.is_object(), "model config {}: not a JSON object", origin);
  const Keys top{config, origin, ""};
  const FamilyInfo& family = detect_family(top);

  ModelSpec s;
  s.family = family.family;
  s.architecture = family.architecture;
  s.vocab_size = top.integer("vocab_size");
  s.hidden_size = top.integer("hidden_size");
  s.intermediate_size = top.integer("intermediate_size");
  s.num_layers = top.integer("num_hidden_layers");
  s.num_heads = top.integer("num_attention_heads");
  for (const auto& [key, value] : {std::pair{"vocab_size", s.vocab_size},
                                   {"hidden_size", s.hidden_size},
                                   {"intermediate_size", s.intermediate_size},
                                   {"num_hidden_layers", s.num_layers},
                                   {"num_attention_heads", s.num_heads}})
    MT_REQUIRE(value > 0, "model config {}: key '{}' must be positive, got {}", origin, key, value);
  MT_REQUIRE(
      top.has("head_dim") || family.default_head_dim || s.hidden_size % s.num_heads == 0,
      "model config {}: hidden_size ({}) is not a multiple of num_attention_heads ({}) and head_dim is not given",
      origin, s.hidden_size, s.num_heads);
  s.num_kv_heads = top.integer("num_key_value_heads", family.default_kv_heads ? family.default_kv_heads : s.num_heads);
  s.head_dim = top.integer("head_dim", family.default_head_dim ? family.default_head_dim : s.hidden_size / s.num_heads);
  s.max_position_embeddings = top.integer("max_position_embeddings", family.default_max_positions);
  s.rms_norm_eps = top.number("rms_norm_eps", 1e-6);
  s.initializer_range = top.number("initializer_range", 0.02);
  s.tie_word_embeddings = top.boolean("tie_word_embeddings", false);

  MT_REQUIRE(s.num_kv_heads > 0 && s.num_heads % s.num_kv_heads == 0,
             "model config {}: num_attention_heads ({}) is not a multiple of num_key_value_heads ({})", origin,
             s.num_heads, s.num_kv_heads);
  MT_REQUIRE(s.head_dim > 0 && s.head_dim % 2 == 0, "model config {}: key 'head_dim' must be positive and even, got {}",
             origin, s.head_dim);
  MT_REQUIRE(s.max_position_embeddings > 0, "model config {}: key 'max_position_embeddings' must be positive", origin);
  MT_REQUIRE(s.rms_norm_eps > 0.0, "model config {}: key 'rms_norm_eps' must be positive", origin);
  MT_REQUIRE(s.initializer_range >= 0.0, "model config {}: key 'initializer_range' must not be negative", origin);
  const std::string act = top.string("hidden_act", "silu");
  MT_REQUIRE(act == "silu", "model config {}: key 'hidden_act' is '{}', only silu is supported", origin, act);

  switch (s.family) {
    case ModelFamily::llama:
      s.attention_bias = s.o_proj_bias = top.boolean("attention_bias", false);
      s.mlp_bias = top.boolean("mlp_bias", false);
      break;
    case ModelFamily::qwen2:  // q, k, v always carry a bias; o_proj never does
      s.attention_bias = true;
      break;
    case ModelFamily::qwen3:
      s.attention_bias = s.o_proj_bias = top.boolean("attention_bias", false);
      s.qk_norm = true;
      break;
    case ModelFamily::mistral:
      break;
  }
  s.sliding_window = parse_sliding_windows(top, s.family, s.num_layers);
  s.rope = parse_rope(top, s.max_position_embeddings);
  const auto rot_dim = static_cast<int64_t>(static_cast<double>(s.head_dim) * s.rope.partial_rotary_factor);
  MT_REQUIRE(rot_dim >= 2 && rot_dim % 2 == 0,
             "model config {}: rotary dimension {} (head_dim {} × partial_rotary_factor {}) must be even and positive",
             origin, rot_dim, s.head_dim, s.rope.partial_rotary_factor);
  s.config_json = config.dump(2);
  return s;
}

ModelSpec load_model_spec(const std::filesystem::path& config_json) {
  std::ifstream in(config_json);
  MT_REQUIRE(in.good(), "model config {}: cannot open", config_json.string());
  std::stringstream text;
  text << in.rdbuf();
  json j;
  try {
    j = json::parse(text.str());
  } catch (const json::parse_error& e) {
    MT_REQUIRE(false, "model config {}: not valid JSON: {}", config_json.string(), e.what());
  }
  ModelSpec s = parse_model_spec(j, config_json.string());
  s.config_json = text.str();
  return s;
}

std::string family_name(ModelFamily f) {
  for (const auto& info : kFamilies)
    if (info.family == f) return info.model_type;
  MT_ASSERT(false, "unknown ModelFamily");
  return "";
}

int64_t count_parameters(const ModelSpec& spec) { return make_param_layout(spec).total_numel; }

}  // namespace mt
