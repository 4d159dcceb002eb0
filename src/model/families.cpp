// The family table and the dense-transformer pieces the family parsers share (see families.h).
#include "model/families.h"

#include <algorithm>
#include <cmath>

#include "model/rope_config.h"

namespace mt {

const std::vector<FamilyEntry>& model_families() {
  static const std::vector<FamilyEntry> table = {
      {"LlamaForCausalLM", "llama", parse_llama, false},
      {"MistralForCausalLM", "mistral", parse_mistral, false},
      {"Qwen2ForCausalLM", "qwen2", parse_qwen2, false},
      {"Qwen3ForCausalLM", "qwen3", parse_qwen3, false},
      {"Gemma2ForCausalLM", "gemma2", parse_gemma2, false},
      {"Gemma3ForCausalLM", "gemma3_text", parse_gemma3, false},
      {"Gemma3ForConditionalGeneration", "gemma3", parse_gemma3_multimodal, false},
      {"Phi3ForCausalLM", "phi3", parse_phi3, false},
      {"Glm4ForCausalLM", "glm4", parse_glm4, false},
      {"InternLM2ForCausalLM", "internlm2", parse_internlm2, true},
      {"BaichuanForCausalLM", "baichuan", parse_baichuan, true},
      {"Qwen3_5ForCausalLM", "qwen3_5_text", parse_qwen3_5, false},
      {"Qwen3_5ForConditionalGeneration", "qwen3_5", parse_qwen3_5_multimodal, false},
      {"Qwen3_5MoeForCausalLM", "qwen3_5_moe_text", parse_qwen3_5, false},
      {"Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe", parse_qwen3_5_multimodal, false},
      {"Qwen3NextForCausalLM", "qwen3_next", parse_qwen3_next, false},
      {"MixtralForCausalLM", "mixtral", parse_mixtral, false},
      {"MiniMaxForCausalLM", "minimax", parse_minimax, false},
      {"Qwen2MoeForCausalLM", "qwen2_moe", parse_qwen2_moe, false},
      {"Qwen3MoeForCausalLM", "qwen3_moe", parse_qwen3_moe, false},
      {"Glm4MoeForCausalLM", "glm4_moe", parse_glm4_moe, false},
      {"Llama4ForCausalLM", "llama4_text", parse_llama4, false},
      {"Llama4ForConditionalGeneration", "llama4", parse_llama4_multimodal, false},
      {"GptOssForCausalLM", "gpt_oss", parse_gpt_oss, false},
      {"SeedOssForCausalLM", "seed_oss", parse_seed_oss, false},
      {"Ernie4_5ForCausalLM", "ernie4_5", parse_ernie4_5, false},
      {"SmolLM3ForCausalLM", "smollm3", parse_smollm3, false},
      {"GraniteForCausalLM", "granite", parse_granite, false},
      {"HunYuanDenseV1ForCausalLM", "hunyuan_v1_dense", parse_hunyuan_dense, false},
      {"Olmo2ForCausalLM", "olmo2", parse_olmo2, false},
      {"Olmo3ForCausalLM", "olmo3", parse_olmo3, false},
      {"Exaone4ForCausalLM", "exaone4", parse_exaone4, false},
      {"Starcoder2ForCausalLM", "starcoder2", parse_starcoder2, false},
      {"CohereForCausalLM", "cohere", parse_cohere, false},
      {"Cohere2ForCausalLM", "cohere2", parse_cohere2, false},
      {"DeepseekV2ForCausalLM", "deepseek_v2", parse_deepseek_v2, false},
      {"DeepseekV3ForCausalLM", "deepseek_v3", parse_deepseek_v3, false},
      {"Glm4MoeLiteForCausalLM", "glm4_moe_lite", parse_glm4_moe_lite, false},
  };
  return table;
}

Activation parse_activation(const ConfigKeys& top, const char* key, const std::string& value) {
  if (value == "silu" || value == "swish") return Activation::silu;
  if (value == "gelu_pytorch_tanh" || value == "gelu_new" || value == "gelu_fast") return Activation::gelu_tanh;
  MT_REQUIRE(false, "model config {}: key '{}' is '{}'; supported: silu, gelu_pytorch_tanh", top.origin, key, value);
  return Activation::silu;
}

void parse_dense_model(const ConfigKeys& top, const DenseDefaults& d, ModelSpec& s) {
  s.vocab_size = top.positive("vocab_size");
  s.hidden_size = top.positive("hidden_size");
  const int64_t intermediate = top.positive("intermediate_size");
  s.num_layers = top.positive("num_hidden_layers");
  const int64_t heads = top.positive(d.heads_key);
  MT_REQUIRE(top.has("head_dim") || d.head_dim || s.hidden_size % heads == 0,
             "model config {}: hidden_size ({}) is not a multiple of {} ({}) and head_dim is not given", top.origin,
             s.hidden_size, d.heads_key, heads);
  AttentionSpec a;
  a.num_heads = heads;
  a.num_kv_heads = top.integer(d.kv_heads_key, d.kv_heads ? d.kv_heads : heads);
  a.head_dim = top.integer("head_dim", d.head_dim ? d.head_dim : s.hidden_size / heads);
  MT_REQUIRE(a.num_kv_heads > 0 && a.num_heads % a.num_kv_heads == 0,
             "model config {}: {} ({}) is not a multiple of {} ({})", top.origin, d.heads_key, a.num_heads,
             d.kv_heads_key, a.num_kv_heads);
  MT_REQUIRE(a.head_dim > 0 && a.head_dim % 2 == 0, "model config {}: key 'head_dim' must be positive and even, got {}",
             top.origin, a.head_dim);
  a.scale = 1.0 / std::sqrt(static_cast<double>(a.head_dim));
  s.max_position_embeddings = top.integer("max_position_embeddings", d.max_positions);
  s.rms_norm_eps = top.number(d.eps_key, d.eps);
  s.initializer_range = top.number("initializer_range", 0.02);
  s.tie_word_embeddings = top.boolean("tie_word_embeddings", false);
  // transformers builds nn.Embedding(vocab, hidden, padding_idx=pad_token_id): that row gets no gradient from the
  // lookup (it still gets the tied head's).
  const bool null_pad = top.j.contains("pad_token_id") && top.at("pad_token_id").is_null();
  const int64_t default_pad = d.pad_token_id < s.vocab_size ? d.pad_token_id : -1;  // tiny configs: none
  s.padding_idx = null_pad ? -1 : top.integer("pad_token_id", default_pad);
  MT_REQUIRE(s.padding_idx >= -1 && s.padding_idx < s.vocab_size,
             "model config {}: key 'pad_token_id' ({}) must name a token below vocab_size ({})", top.origin,
             s.padding_idx, s.vocab_size);
  MT_REQUIRE(s.max_position_embeddings > 0, "model config {}: key 'max_position_embeddings' must be positive",
             top.origin);
  MT_REQUIRE(s.rms_norm_eps > 0.0, "model config {}: key '{}' must be positive", top.origin, d.eps_key);
  MT_REQUIRE(s.initializer_range >= 0.0, "model config {}: key 'initializer_range' must not be negative", top.origin);

  MlpSpec m;
  m.intermediate_size = intermediate;
  const char* act_key = top.has("hidden_activation") ? "hidden_activation" : "hidden_act";
  m.activation = parse_activation(top, act_key, top.string(act_key, d.hidden_act));

  const ConfigKeys dict = rope_dict(top);
  MT_REQUIRE(!dict.has("full_attention") && !dict.has("sliding_attention"),
             "model config {}: per-layer-type '{}' are not supported by {}", top.origin,
             dict.where.substr(0, dict.where.size() - 1), s.architecture);
  RopeSpec rope = parse_rope(top, dict, s.max_position_embeddings, d.rope_theta);
  rope.head_dim = a.head_dim;
  s.rope_tables = {rope};
  s.layers.assign(static_cast<size_t>(s.num_layers), LayerSpec{.attention = a, .mlp = m});
}

std::vector<bool> sliding_layers(const ConfigKeys& top, int64_t num_layers, const std::vector<bool>& fallback) {
  if (!top.has("layer_types")) return fallback;
  const nlohmann::json& types = top.at("layer_types");
  MT_REQUIRE(types.is_array() && static_cast<int64_t>(types.size()) == num_layers,
             "model config {}: key 'layer_types' must list {} layer types (num_hidden_layers), got {}", top.origin,
             num_layers, types.is_array() ? std::to_string(types.size()) : types.dump());
  std::vector<bool> sliding(static_cast<size_t>(num_layers));
  for (size_t i = 0; i < sliding.size(); ++i) {
    sliding[i] = types[i] == "sliding_attention";
    MT_REQUIRE(sliding[i] || types[i] == "full_attention",
               "model config {}: key 'layer_types' entry {} must be full_attention or sliding_attention, got {}",
               top.origin, i, types[i].dump());
  }
  return sliding;
}

int64_t sliding_window_size(const ConfigKeys& top, int64_t fallback) {
  const int64_t window = top.integer("sliding_window", fallback);
  MT_REQUIRE(window > 0, "model config {}: key 'sliding_window' must be positive or null", top.origin);
  return window;
}

std::vector<int64_t> layer_windows(const ConfigKeys& top, const std::vector<bool>& sliding, int64_t fallback) {
  const bool null_window = top.j.contains("sliding_window") && top.at("sliding_window").is_null();
  std::vector<int64_t> windows(sliding.size(), 0);
  for (size_t i = 0; i < sliding.size(); ++i) {
    if (!sliding[i]) continue;
    MT_REQUIRE(!null_window, "model config {}: key 'sliding_window' is null but layer_types marks layer {} sliding",
               top.origin, i);
    windows[i] = sliding_window_size(top, fallback);
  }
  return windows;
}

void validate_model_spec(const ModelSpec& s, const std::string& origin) {
  MT_REQUIRE(static_cast<int64_t>(s.layers.size()) == s.num_layers && !s.rope_tables.empty(),
             "model config {}: {} layer specs for {} layers", origin, s.layers.size(), s.num_layers);
  for (size_t t = 0; t < s.rope_tables.size(); ++t) {
    const RopeSpec& r = s.rope_tables[t];
    MT_REQUIRE(r.rot_dim() >= 2 && r.rot_dim() % 2 == 0,
               "model config {}: rotary dimension {} (head_dim {} × partial_rotary_factor {}) must be even and positive",
               origin, r.rot_dim(), r.head_dim, r.partial_rotary_factor);
    if (r.type == "longrope")
      for (const auto* f : {&r.short_factor, &r.long_factor})
        MT_REQUIRE(static_cast<int64_t>(f->size()) == r.rot_dim() / 2,
                   "model config {}: longrope short_factor and long_factor must have {} entries (rotary dim / 2), got {}",
                   origin, r.rot_dim() / 2, f->size());
  }
  for (size_t i = 0; i < s.layers.size(); ++i) {
    const AttentionSpec& a = s.layers[i].attention;
    MT_REQUIRE(a.rope >= -1 && a.rope < static_cast<int>(s.rope_tables.size()),
               "model config {}: layer {} names rope table {} of {}", origin, i, a.rope, s.rope_tables.size());
    const int64_t rope_dim = s.layers[i].is_mla() ? s.layers[i].mla.qk_rope_head_dim : a.head_dim;
    MT_REQUIRE(a.rope < 0 || s.rope_tables[static_cast<size_t>(a.rope)].head_dim == rope_dim,
               "model config {}: layer {}'s rope table is for another head_dim", origin, i);
    MT_REQUIRE(a.window >= 0, "model config {}: sliding window {} of layer {} is negative", origin, a.window, i);
    MT_REQUIRE(s.layers[i].mlp.intermediate_size > 0 || s.layers[i].moe.active(),
               "model config {}: layer {} has no MLP width", origin, i);
    const LayerSpec& l = s.layers[i];
    MT_REQUIRE(!l.parallel_residual || (l.pre_norms && !l.post_norms && !l.scaled_residual()),
               "model config {}: layer {} has a parallel residual with post-block norms or a residual multiplier",
               origin, i);
    MT_REQUIRE(!l.normed_residual || (l.pre_norms && !l.post_norms && !l.parallel_residual && !l.scaled_residual()),
               "model config {}: layer {} has residuals from its norms with post-block norms, a parallel residual or "
               "a residual multiplier", origin, i);
  }
}

}  // namespace mt
