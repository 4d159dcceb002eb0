// Llama4ForCausalLM and the text tower of Llama4ForConditionalGeneration (Llama 4 Scout, Maverick), as transformers'
// modeling_llama4 computes them. Attention: RoPE layers (no_rope_layers[i] == 1; by default all but every
// no_rope_layer_interval-th) rotate interleaved pairs (x[2i], x[2i+1]) (its complex-number RoPE) with the llama3
// scaling, L2-normalise q and k per head without a weight (use_qk_norm) and attend in chunks of attention_chunk_size
// (layer_types chunked_attention); NoPE layers attend fully and, with attn_temperature_tuning, scale their queries by
// log1p(floor((p + 1) / floor_scale))·attn_scale + 1. Feed-forward: moe_layers (by default every
// interleave_moe_layer_step-th layer, the last of each step) are num_local_experts SwiGLU experts of
// intermediate_size under a sigmoid top num_experts_per_tok router whose weight scales the expert's input, plus a
// shared expert of intermediate_size; the other layers dense MLPs of intermediate_size_mlp. The experts are two
// fused tensors (feed_forward.experts.gate_up_proj [E, H, 2I], down_proj [E, I, H]). transformers computes no router
// load-balancing loss for Llama 4 (router_aux_loss_coef and router_jitter_noise are unused there, and here).
// The conditional-generation checkpoints' vision tower and projector stay frozen and are carried through export.
#include <algorithm>

#include "model/families.h"
#include "model/rope_config.h"

namespace mt {
namespace {

// Llama4TextConfig's defaults for the keys a saved config may leave out (its diff against them).
nlohmann::json with_text_defaults(nlohmann::json text) {
  const nlohmann::json defaults = {{"vocab_size", 202048},          {"hidden_size", 5120},
                                   {"intermediate_size", 8192},     {"num_hidden_layers", 48},
                                   {"num_attention_heads", 40},     {"num_key_value_heads", 8},
                                   {"head_dim", 128},               {"max_position_embeddings", 131072},
                                   {"rms_norm_eps", 1e-5}};
  for (const auto& [key, value] : defaults.items())
    if (!text.contains(key) || text[key].is_null()) text[key] = value;
  if (!text.contains("rope_theta") && !text.contains("rope_parameters")) text["rope_theta"] = 500000.0;
  return text;
}

// A list of num_layers 0/1 flags (no_rope_layers), or `fallback` where the key is absent or empty.
std::vector<bool> layer_flags(const ConfigKeys& top, const char* key, int64_t num_layers, std::vector<bool> fallback) {
  if (!top.has(key) || (top.at(key).is_array() && top.at(key).empty())) return fallback;
  const nlohmann::json& v = top.at(key);
  MT_REQUIRE(v.is_array() && static_cast<int64_t>(v.size()) == num_layers,
             "model config {}: key '{}{}' must list {} flags (num_hidden_layers), got {}", top.origin, top.where, key,
             num_layers, v.dump());
  std::vector<bool> flags;
  for (const auto& e : v) {
    MT_REQUIRE(e.is_number_integer() || e.is_boolean(), "model config {}: key '{}{}' entries must be 0 or 1, got {}",
               top.origin, top.where, key, e.dump());
    flags.push_back(e.is_boolean() ? e.get<bool>() : e.get<int64_t>() != 0);
  }
  return flags;
}

// moe_layers (layer indices) or every interleave_moe_layer_step-th layer from step − 1.
std::vector<bool> moe_layers(const ConfigKeys& top, int64_t num_layers) {
  const int64_t step = top.integer("interleave_moe_layer_step", 1);
  MT_REQUIRE(step > 0, "model config {}: key '{}interleave_moe_layer_step' must be positive, got {}", top.origin,
             top.where, step);
  std::vector<bool> moe(static_cast<size_t>(num_layers));
  if (!top.has("moe_layers")) {
    for (int64_t i = step - 1; i < num_layers; i += step) moe[static_cast<size_t>(i)] = true;
    return moe;
  }
  const nlohmann::json& v = top.at("moe_layers");
  MT_REQUIRE(v.is_array(), "model config {}: key '{}moe_layers' must be a list of layer indices", top.origin, top.where);
  for (const auto& e : v) {
    MT_REQUIRE(e.is_number_integer() && e.get<int64_t>() >= 0 && e.get<int64_t>() < num_layers,
               "model config {}: key '{}moe_layers' entry {} is not a layer index below {}", top.origin, top.where,
               e.dump(), num_layers);
    moe[e.get<size_t>()] = true;
  }
  return moe;
}

// layer_types (chunked_attention / full_attention) as "is chunked", or chunked exactly where RoPE is.
std::vector<bool> chunked_layers(const ConfigKeys& top, int64_t num_layers, const std::vector<bool>& rope) {
  if (!top.has("layer_types")) return rope;
  const nlohmann::json& types = top.at("layer_types");
  MT_REQUIRE(types.is_array() && static_cast<int64_t>(types.size()) == num_layers,
             "model config {}: key '{}layer_types' must list {} layer types (num_hidden_layers), got {}", top.origin,
             top.where, num_layers, types.dump());
  std::vector<bool> chunked;
  for (const auto& t : types) {
    MT_REQUIRE(t == "chunked_attention" || t == "full_attention",
               "model config {}: key '{}layer_types' entries must be chunked_attention or full_attention, got {}",
               top.origin, top.where, t.dump());
    chunked.push_back(t == "chunked_attention");
  }
  return chunked;
}

// attn_temperature_tuning: a bool, or (as the published configs write it) a number that Python reads as truthy.
bool temperature_tuning(const ConfigKeys& top) {
  if (!top.has("attn_temperature_tuning")) return true;
  const nlohmann::json& v = top.at("attn_temperature_tuning");
  MT_REQUIRE(v.is_boolean() || v.is_number(), "model config {}: key '{}attn_temperature_tuning' must be true, false "
             "or a number, got {}", top.origin, top.where, v.dump());
  return v.is_boolean() ? v.get<bool>() : v.get<double>() != 0.0;
}

}  // namespace

void parse_llama4(const ConfigKeys& raw, ModelSpec& s) {
  const nlohmann::json config = with_text_defaults(raw.j);
  const ConfigKeys top{config, raw.origin, raw.where};
  parse_dense_model(top, {.max_positions = 131072, .kv_heads = 8, .head_dim = 128, .eps = 1e-5}, s);
  s.rope_tables[0].interleaved = true;  // view_as_complex over (x[2i], x[2i+1])
  const int64_t L = s.num_layers;
  std::vector<bool> rope_default(static_cast<size_t>(L));
  const int64_t interval = top.integer("no_rope_layer_interval", 4);
  MT_REQUIRE(interval > 0, "model config {}: key '{}no_rope_layer_interval' must be positive", top.origin, top.where);
  for (int64_t i = 0; i < L; ++i) rope_default[static_cast<size_t>(i)] = (i + 1) % interval != 0;
  const std::vector<bool> rope = layer_flags(top, "no_rope_layers", L, rope_default);
  const int64_t chunk = top.integer("attention_chunk_size", 8192);
  MT_REQUIRE(chunk > 0, "model config {}: key '{}attention_chunk_size' must be positive or null", top.origin,
             top.where);
  const bool has_chunks = top.has("attention_chunk_size") || !top.j.contains("attention_chunk_size");
  const std::vector<bool> chunked = chunked_layers(top, L, has_chunks ? rope : std::vector<bool>(static_cast<size_t>(L)));
  MT_REQUIRE(has_chunks || std::none_of(chunked.begin(), chunked.end(), [](bool c) { return c; }),
             "model config {}: key '{}layer_types' names chunked_attention layers but 'attention_chunk_size' is null",
             top.origin, top.where);
  const bool qk_norm = top.boolean("use_qk_norm", true), bias = top.boolean("attention_bias", false);
  const bool temperature = temperature_tuning(top);
  const double floor_scale = top.number("floor_scale", 8192), attn_scale = top.number("attn_scale", 0.1);
  MT_REQUIRE(floor_scale > 0.0, "model config {}: key '{}floor_scale' must be positive", top.origin, top.where);

  MoeSpec moe = parse_moe_spec(top, "num_local_experts", 16, "intermediate_size", 1);
  moe.router = RouterKind::sigmoid_group;
  moe.weight_scales_input = true;
  moe.shared_intermediate_size = moe.intermediate_size;
  const int64_t dense_width = top.integer("intermediate_size_mlp", 16384);
  MT_REQUIRE(dense_width > 0, "model config {}: key '{}intermediate_size_mlp' must be positive", top.origin, top.where);
  const std::vector<bool> sparse = moe_layers(top, L);
  for (size_t i = 0; i < s.layers.size(); ++i) {
    AttentionSpec& a = s.layers[i].attention;
    a.qkv_bias = a.o_bias = bias;
    if (rope[i]) {
      a.qk_l2_norm = qk_norm;
    } else {
      a.rope = -1;
      if (temperature) {
        a.temperature_floor_scale = floor_scale;
        a.temperature_attn_scale = attn_scale;
      }
    }
    if (chunked[i]) a.chunk = chunk;
    if (sparse[i])
      s.layers[i].moe = moe;
    else
      s.layers[i].mlp.intermediate_size = dense_width;
  }
  TensorNames& n = s.names;
  n.gate = "feed_forward.gate_proj";
  n.up = "feed_forward.up_proj";
  n.down = "feed_forward.down_proj";
  n.router = "feed_forward.router";
  n.router_score_bias.clear();
  n.experts = "feed_forward.experts.";
  n.fused_experts = true;
  n.fused_layout = FusedExpertLayout::columns;
  n.shared_gate_proj = "feed_forward.shared_expert.gate_proj";
  n.shared_up_proj = "feed_forward.shared_expert.up_proj";
  n.shared_down_proj = "feed_forward.shared_expert.down_proj";
}

void parse_llama4_multimodal(const ConfigKeys& top, ModelSpec& s) {
  MT_REQUIRE(top.has("text_config"), "model config {}: {} needs 'text_config'", top.origin, s.architecture);
  nlohmann::json text = top.at("text_config");
  MT_REQUIRE(text.is_object(), "model config {}: key 'text_config' must be an object", top.origin);
  if (!text.contains("tie_word_embeddings")) text["tie_word_embeddings"] = top.boolean("tie_word_embeddings", false);
  const ConfigKeys inner{text, top.origin, "text_config."};
  parse_llama4(inner, s);
  TensorNames& n = s.names;
  n.embedding = "language_model.model.embed_tokens.weight";
  n.final_norm = "language_model.model.norm.weight";
  n.layer_prefix = "language_model.model.layers.";
  n.lm_head = "language_model.lm_head.weight";
  s.carries_other_tensors = true;
}

}  // namespace mt
