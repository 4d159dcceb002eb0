// ModelSpec: what a Hugging Face config.json says about a decoder-only model, validated and typed.
// Invariant: a ModelSpec is internally consistent (heads divide, head_dim set, rope parameters complete).
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace mt {

enum class ModelFamily { llama, qwen2, qwen3, mistral };

struct RopeSpec {
  std::string type = "default";          // default | linear | llama3 | yarn
  double theta = 10000.0;
  double factor = 1.0;                   // linear, llama3, yarn
  double low_freq_factor = 1.0;          // llama3
  double high_freq_factor = 4.0;         // llama3
  int64_t original_max_position_embeddings = 0;  // llama3, yarn
  double beta_fast = 32.0;               // yarn
  double beta_slow = 1.0;                // yarn
  double attention_factor = 0.0;         // yarn; 0 = derived from factor as transformers does
  bool truncate = true;                  // yarn
  double partial_rotary_factor = 1.0;    // fraction of head_dim that rotates
};

struct ModelSpec {
  std::string architecture;              // e.g. "Qwen2ForCausalLM"
  ModelFamily family = ModelFamily::llama;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double initializer_range = 0.02;
  bool tie_word_embeddings = false;
  bool attention_bias = false;           // bias on q, k, v projections (Qwen2; Llama's attention_bias)
  bool o_proj_bias = false;              // bias on o_proj (Llama's attention_bias also sets this)
  bool mlp_bias = false;                 // bias on gate/up/down (Llama's mlp_bias)
  bool qk_norm = false;                  // per-head RMSNorm on q and k before RoPE (Qwen3)
  std::vector<int64_t> sliding_window;   // per layer: window in tokens, 0 = full causal attention
  RopeSpec rope;
  std::string config_json;               // the original config.json text
};

ModelSpec parse_model_spec(const nlohmann::json& config, const std::string& origin);
ModelSpec load_model_spec(const std::filesystem::path& config_json);  // throws mt::Error naming the file
std::string family_name(ModelFamily f);
int64_t count_parameters(const ModelSpec& spec);

}  // namespace mt
