// The table of model families: which config.json `architectures` (or `model_type`) each parser reads, and the
// shared pieces the parsers of dense transformer families build on (src/model/family_*.cpp, one per family).
// Invariant: a family parser leaves a ModelSpec that validate_model_spec accepts, or raises mt::Error naming the
// config and the key.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/config_keys.h"
#include "model/model_spec.h"

namespace mt {

using FamilyParser = void (*)(const ConfigKeys& top, ModelSpec& spec);

struct FamilyEntry {
  const char* architecture;  // e.g. "Gemma2ForCausalLM"
  const char* model_type;    // family name: config.json model_type, ModelSpec::family, template: auto's key
  FamilyParser parse;
  bool trust_remote_code;    // the modeling code is not in transformers (model.trust_remote_code must be true)
};
const std::vector<FamilyEntry>& model_families();

// The parsers (one file each).
void parse_llama(const ConfigKeys&, ModelSpec&);
void parse_mistral(const ConfigKeys&, ModelSpec&);
void parse_qwen2(const ConfigKeys&, ModelSpec&);
void parse_qwen3(const ConfigKeys&, ModelSpec&);
void parse_gemma2(const ConfigKeys&, ModelSpec&);
void parse_gemma3(const ConfigKeys&, ModelSpec&);
void parse_gemma3_multimodal(const ConfigKeys&, ModelSpec&);
void parse_phi3(const ConfigKeys&, ModelSpec&);
void parse_glm4(const ConfigKeys&, ModelSpec&);
void parse_internlm2(const ConfigKeys&, ModelSpec&);
void parse_baichuan(const ConfigKeys&, ModelSpec&);
void parse_qwen3_5(const ConfigKeys&, ModelSpec&);
void parse_qwen3_5_multimodal(const ConfigKeys&, ModelSpec&);
void parse_qwen3_next(const ConfigKeys&, ModelSpec&);
void parse_mixtral(const ConfigKeys&, ModelSpec&);
void parse_qwen2_moe(const ConfigKeys&, ModelSpec&);
void parse_qwen3_moe(const ConfigKeys&, ModelSpec&);
void parse_glm4_moe(const ConfigKeys&, ModelSpec&);
void parse_llama4(const ConfigKeys&, ModelSpec&);
void parse_llama4_multimodal(const ConfigKeys&, ModelSpec&);
void parse_gpt_oss(const ConfigKeys&, ModelSpec&);
void parse_seed_oss(const ConfigKeys&, ModelSpec&);
void parse_ernie4_5(const ConfigKeys&, ModelSpec&);
void parse_smollm3(const ConfigKeys&, ModelSpec&);
void parse_granite(const ConfigKeys&, ModelSpec&);
void parse_hunyuan_dense(const ConfigKeys&, ModelSpec&);
void parse_olmo2(const ConfigKeys&, ModelSpec&);
void parse_olmo3(const ConfigKeys&, ModelSpec&);
void parse_exaone4(const ConfigKeys&, ModelSpec&);
void parse_starcoder2(const ConfigKeys&, ModelSpec&);
void parse_cohere(const ConfigKeys&, ModelSpec&);
void parse_cohere2(const ConfigKeys&, ModelSpec&);
void parse_deepseek_v2(const ConfigKeys&, ModelSpec&);
void parse_deepseek_v3(const ConfigKeys&, ModelSpec&);
void parse_glm4_moe_lite(const ConfigKeys&, ModelSpec&);
void parse_minimax(const ConfigKeys&, ModelSpec&);

// transformers' config class defaults that differ between families.
struct DenseDefaults {
  int64_t max_positions = 2048;
  int64_t kv_heads = 0;        // 0: num_attention_heads
  int64_t head_dim = 0;        // 0: hidden_size / num_attention_heads
  const char* hidden_act = "silu";
  const char* heads_key = "num_attention_heads";
  const char* kv_heads_key = "num_key_value_heads";
  const char* eps_key = "rms_norm_eps";
  double eps = 1e-6;
  int64_t pad_token_id = -1;   // the config class's default pad_token_id; -1: None
  double rope_theta = 10000.0; // the config class's default_theta
};
// The model-wide fields and num_layers identical layers: full causal attention with rope table 0 (read with
// parse_rope from rope_dict(top); per-layer-type rope dicts are refused), scale 1/sqrt(head_dim), a bias-free
// MLP with hidden_act.
void parse_dense_model(const ConfigKeys& top, const DenseDefaults& defaults, ModelSpec& spec);
// hidden_act / hidden_activation value → Activation; unknown names are refused naming the key.
Activation parse_activation(const ConfigKeys& top, const char* key, const std::string& value);
// config.json `layer_types` (each full_attention or sliding_attention) as "is sliding" per layer, or
// `fallback` when the key is absent; a wrong length or entry is refused.
std::vector<bool> sliding_layers(const ConfigKeys& top, int64_t num_layers, const std::vector<bool>& fallback);
// The sliding_window key, positive.
int64_t sliding_window_size(const ConfigKeys& top, int64_t fallback);
// Each layer's window: sliding_window_size(top, fallback) where `sliding` marks the layer, else 0; a sliding layer
// with sliding_window null is refused (transformers' sliding mask needs the window).
std::vector<int64_t> layer_windows(const ConfigKeys& top, const std::vector<bool>& sliding, int64_t fallback);

// The hybrid stack of Qwen3.5 and Qwen3-Next (family_qwen3_5.cpp): parse_dense_model, then per layer (layer_types
// or full_attention_interval) a Gated DeltaNet mixer or gated full attention with q/k norm; (1 + w) norms.
void parse_hybrid_model(const ConfigKeys& top, const DenseDefaults& defaults, ModelSpec& spec);
// The sparse feed-forward Qwen3.5-MoE and Qwen3-Next share (Qwen2-MoE's): num_experts experts of
// moe_intermediate_size (default 512), the softmax top num_experts_per_tok, a shared expert of
// shared_expert_intermediate_size (default 512) scaled by sigmoid(shared_expert_gate(x)); norm_topk left to the caller.
MoeSpec parse_qwen_hybrid_moe(const ConfigKeys& top, int64_t default_experts, int64_t default_top_k);
// Mixture-of-experts pieces (moe_config.cpp). The expert count from `experts_key` (or its alias
// num_local_experts / num_experts), num_experts_per_tok (at most the experts), the expert width from
// `width_key`; a top_k above the experts is refused naming the key.
MoeSpec parse_moe_spec(const ConfigKeys& top, const char* experts_key, int64_t default_experts, const char* width_key,
                       int64_t default_top_k);
// output_router_logits and router_aux_loss_coef (default 0.001, transformers' for every MoE family here).
void parse_router_aux_loss(const ConfigKeys& top, ModelSpec& spec);
// Mixtral's expert tensor names (moe_config.cpp): block_sparse_moe.gate, block_sparse_moe.experts.N.w1 (gate), w3 (up),
// w2 (down); MiniMax-Text uses them too.
void use_mixtral_expert_names(TensorNames& names);
// Which layers are sparse under Qwen-MoE's rule: not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0.
std::vector<bool> qwen_sparse_layers(const ConfigKeys& top, int64_t num_layers);

// The layer Cohere and Cohere2 share (family_cohere.cpp): parse_dense_model, LayerNorm without bias, the parallel
// residual, interleaved RoPE, logit_scale, attention_bias, tied embeddings.
void parse_cohere_common(const ConfigKeys& top, const DenseDefaults& defaults, ModelSpec& spec);
// The latent-attention families (mla_config.cpp): transformers' config defaults of MLA's dims (0: the key is
// required; kv_lora_rank always is, a config without it is not a latent-attention checkpoint) and of the dense
// fields.
struct MlaDefaults {
  int64_t kv_lora_rank = 0, q_lora_rank = 0, qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  bool rope_interleave = true;
  DenseDefaults dense;
};
// parse_dense_model with head_dim = qk_rope_head_dim (the rope table's), then every layer a latent-attention mixer
// (MlaSpec from kv_lora_rank, q_lora_rank (null: q_proj), qk_nope_head_dim, qk_rope_head_dim, v_head_dim,
// attention_bias) whose attention call has q/k head dim qk_nope + qk_rope and transformers' softmax scale (YaRN's
// mscale_all_dim folded in); rope_interleave picks the rope pairs.
void parse_mla_model(const ConfigKeys& top, const MlaDefaults& defaults, ModelSpec& spec);
struct DeepseekMoeDefaults {
  int64_t experts = 0, top_k = 0, shared_experts = 0;
  double routed_scaling = 1.0;
};
// The DeepSeek mixture of experts (router kind, grouping and norm_topk left to the caller): n_routed_experts of
// moe_intermediate_size, the top num_experts_per_tok, weights × routed_scaling_factor, and n_shared_experts shared
// experts as one ungated MLP of n_shared_experts × moe_intermediate_size (mlp.shared_experts).
MoeSpec parse_deepseek_moe(const ConfigKeys& top, const DeepseekMoeDefaults& defaults, ModelSpec& spec);
// Which layers are sparse under DeepSeek's rule: i >= first_k_dense_replace and i % moe_layer_freq == 0 (the
// published checkpoints' moe_layer_freq is 1, where transformers' rule, i >= first_k_dense_replace, is the same).
std::vector<bool> deepseek_sparse_layers(const ConfigKeys& top, int64_t num_layers, int64_t default_first_dense);
// n_group / topk_group of a group-limited router, checked against the experts and top k.
void parse_expert_groups(const ConfigKeys& top, int64_t default_groups, int64_t default_topk_groups, MoeSpec& moe);

// The whole-spec checks every family's result must pass.
void validate_model_spec(const ModelSpec& spec, const std::string& origin);

}  // namespace mt
