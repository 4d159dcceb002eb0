// config.json → ModelSpec: picks the family parser by `architectures` (else `model_type`) from the family table,
// enforces model.trust_remote_code for families whose modeling code is not in transformers, and validates.
// Invariant: a returned ModelSpec passed validate_model_spec; every rejection names the config and the key.
#include "model/model_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/json_depth.h"
#include "model/families.h"
#include "model/fp8_blocks.h"
#include "model/param_layout.h"

namespace mt {
namespace {

using json = nlohmann::json;

std::string supported_architectures() {
  std::vector<std::string> names;
  for (const FamilyEntry& f : model_families()) names.emplace_back(f.architecture);
  return fmt::format("{}", fmt::join(names, ", "));
}

const FamilyEntry& detect_family(const ConfigKeys& top) {
  if (top.has("architectures")) {
    const json& archs = top.at("architectures");
    MT_REQUIRE(archs.is_array() && !archs.empty() && archs[0].is_string(),
               "model config {}: key 'architectures' must be a non-empty list of names", top.origin);
    const auto name = archs[0].get<std::string>();
    for (const FamilyEntry& f : model_families())
      if (name == f.architecture) return f;
    MT_REQUIRE(false, "model config {}: architecture '{}' is not supported (supported: {})", top.origin, name,
               supported_architectures());
  }
  const std::string type = top.string("model_type", "");
  for (const FamilyEntry& f : model_families())
    if (type == f.model_type) return f;
  MT_REQUIRE(false, "model config {}: model_type '{}' is not supported and no architectures are given (supported: {})",
             top.origin, type, supported_architectures());
  return model_families().front();
}

}  // namespace

ModelSpec parse_model_spec(const json& config, const std::string& origin, bool trust_remote_code) {
  MT_REQUIRE(config.is_object(), "model config {}: not a JSON object", origin);
  const ConfigKeys top{config, origin, ""};
  const FamilyEntry& family = detect_family(top);
  MT_REQUIRE(!family.trust_remote_code || trust_remote_code,
             "model config {}: {} runs modeling code from the model's repository (trust_remote_code); set "
             "model.trust_remote_code: true to train it",
             origin, family.architecture);
  ModelSpec s;
  s.architecture = family.architecture;
  s.family = family.model_type;
  s.trust_remote_code = family.trust_remote_code;
  s.fp8_block_weights = parse_fp8_quantization(top);  // any family's: the loader dequantises
  family.parse(top, s);
  validate_model_spec(s, origin);
  s.config_json = config.dump(2);
  return s;
}

ModelSpec load_model_spec(const std::filesystem::path& config_json, bool trust_remote_code) {
  std::ifstream in(config_json);
  MT_REQUIRE(in.good(), "model config {}: cannot open", config_json.string());
  std::stringstream text;
  text << in.rdbuf();
  require_json_depth(text.str(), "model config " + config_json.string());
  json j;
  try {
    j = json::parse(text.str());
  } catch (const json::parse_error& e) {
    MT_REQUIRE(false, "model config {}: not valid JSON: {}", config_json.string(), e.what());
  }
  ModelSpec s = parse_model_spec(j, config_json.string(), trust_remote_code);
  s.config_json = text.str();
  return s;
}

int64_t count_parameters(const ModelSpec& spec) { return make_param_layout(spec).total_numel; }

int64_t inactive_expert_parameters(const ModelSpec& spec) {
  int64_t n = 0;
  for (const LayerSpec& l : spec.layers)
    if (l.moe.active()) {
      const int64_t per_expert = 3 * l.moe.intermediate_size * spec.hidden_size +
                                 (l.moe.expert_bias ? 2 * l.moe.intermediate_size + spec.hidden_size : 0);
      n += (l.moe.num_experts - l.moe.top_k) * per_expert;
    }
  return n;
}

int64_t count_active_parameters(const ModelSpec& spec) {
  return count_parameters(spec) - inactive_expert_parameters(spec);
}

namespace {

void match_legacy_prefix(ModelSpec& spec, const std::function<bool(const std::string&)>& has_tensor) {
  TensorNames& n = spec.names;
  if (has_tensor(n.embedding)) return;
  for (const auto& [here, there] : n.legacy_prefixes) {
    const auto renamed = [&](const std::string& name) {
      return name.starts_with(here) ? there + name.substr(here.size()) : name;
    };
    if (!has_tensor(renamed(n.embedding))) continue;
    for (const auto& [a, b] : n.legacy_prefixes)
      for (std::string* name : {&n.embedding, &n.final_norm, &n.lm_head, &n.layer_prefix})
        if (name->starts_with(a)) *name = b + name->substr(a.size());
    return;
  }
}

void match_expert_layout(ModelSpec& spec, const std::function<bool(const std::string&)>& has_tensor) {
  TensorNames& n = spec.names;
  if (!n.either_expert_layout) return;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    if (!spec.layers[i].moe.active()) continue;
    const std::string experts = n.layer_prefix + std::to_string(i) + "." + n.experts;
    if (has_tensor(experts + n.fused_gate_up))
      n.fused_experts = true;
    else if (has_tensor(experts + "0." + n.expert_gate + ".weight"))
      n.fused_experts = false;
    return;
  }
}

}  // namespace

void match_tensor_names(ModelSpec& spec, const std::function<bool(const std::string&)>& has_tensor) {
  match_legacy_prefix(spec, has_tensor);
  match_expert_layout(spec, has_tensor);
}

ModelSpec layer_range(const ModelSpec& spec, int64_t first, int64_t layers) {
  MT_ASSERT(first >= 0 && layers > 0 && first + layers <= spec.num_layers, "layers {}..{} of {}", first,
            first + layers, spec.num_layers);
  ModelSpec s = spec;
  s.num_layers = layers;
  s.layers.assign(spec.layers.begin() + first, spec.layers.begin() + first + layers);
  return s;
}

ModelSpec first_layers(const ModelSpec& spec, int64_t layers) { return layer_range(spec, 0, layers); }

std::string describe_layers(const ModelSpec& spec) {
  const auto kind = [&](const LayerSpec& l) {
    const AttentionSpec& a = l.attention;
    const DeltaNetSpec& d = l.deltanet;
    std::string text =
        l.is_deltanet()
            ? fmt::format("gated deltanet {}/{} heads × {}/{}, conv {}", d.num_k_heads, d.num_v_heads, d.k_head_dim,
                          d.v_head_dim, d.conv_kernel)
        : l.is_lightning() ? fmt::format("lightning attention {} heads × {}", l.lightning.num_heads, l.lightning.head_dim)
        : l.is_mla() ? fmt::format("latent attention {} heads × {}/{} (kv rank {}{})", l.mla.num_heads,
                                   l.mla.qk_head_dim(), l.mla.v_head_dim, l.mla.kv_lora_rank,
                                   l.mla.q_lora_rank > 0 ? fmt::format(", q rank {}", l.mla.q_lora_rank) : "")
                     : fmt::format("attention {}/{} heads × {}", a.num_heads, a.num_kv_heads, a.head_dim);
    if (a.output_gate) text += ", output gate";
    if (a.window) text += fmt::format(", window {}", a.window);
    if (a.rope < 0 && !l.linear_mixer()) text += a.alibi ? ", ALiBi" : ", NoPE";
    if (a.rope > 0) text += fmt::format(", rope table {}", a.rope);
    if (a.softcap > 0) text += fmt::format(", soft-cap {}", a.softcap);
    if (a.chunk > 0) text += fmt::format(", chunks of {}", a.chunk);
    if (a.qk_l2_norm) text += ", q/k L2 norm";
    if (a.qk_norm && (a.qk_norm_whole || a.qk_norm_after_rope) && !l.linear_mixer())
      text += fmt::format(", q/k norm{}{}", a.qk_norm_whole ? " over the projection" : "",
                          a.qk_norm_after_rope ? " after RoPE" : "");
    if (a.qk_layer_norm) text += ", per-head q/k LayerNorm";
    if (a.temperature_floor_scale > 0) text += ", temperature tuning";
    if (a.sinks && !l.linear_mixer()) text += ", sinks";
    if (l.moe.active()) {
      text += fmt::format(", MoE {} experts × {} top {}{}", l.moe.num_experts, l.moe.intermediate_size, l.moe.top_k,
                          l.moe.norm_topk ? " renormalised" : "");
      if (l.moe.router == RouterKind::sigmoid_group)
        text += fmt::format(" (sigmoid, {} of {} groups, × {})", l.moe.topk_groups, l.moe.groups, l.moe.routed_scaling);
      if (l.moe.weight_scales_input) text += " scaling inputs";
      if (l.moe.router == RouterKind::topk_softmax) text += " (softmax of the top logits)";
      if (l.moe.clamped_swiglu())
        text += fmt::format(", clamped SwiGLU (alpha {}, limit {})", l.moe.swiglu_alpha, l.moe.swiglu_limit);
      if (l.moe.shared_intermediate_size > 0)
        text += fmt::format(" + shared {}{}", l.moe.shared_intermediate_size, l.moe.shared_gate ? " gated" : "");
    } else {
      text += fmt::format(", MLP {} {}{}", l.mlp.intermediate_size,
                          l.mlp.activation == Activation::silu ? "silu" : "gelu_tanh", l.mlp.gated ? "" : " non-gated");
    }
    if (l.post_norms) text += l.pre_norms ? ", sandwich norms" : ", post-block norms";
    if (l.scaled_residual()) text += fmt::format(", residual × {}", l.residual_multiplier);
    if (l.parallel_residual) text += ", parallel residual";
    if (l.normed_residual)
      text += fmt::format(", residuals from the norms ({}·x + {}·mixer, {}·x + {}·ffn)", l.mixer_residual.alpha,
                          l.mixer_residual.beta, l.ffn_residual.alpha, l.ffn_residual.beta);
    return text;
  };
  std::string out;
  for (size_t i = 0; i < spec.layers.size();) {
    size_t j = i;
    const std::string k = kind(spec.layers[i]);
    while (j < spec.layers.size() && kind(spec.layers[j]) == k) ++j;
    out += fmt::format("{}{} ×{}", out.empty() ? "" : "; ", k, j - i);
    i = j;
  }
  return out;
}

}  // namespace mt
