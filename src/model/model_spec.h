// ModelSpec: what a Hugging Face config.json says about a decoder-only model, validated and typed: one LayerSpec
// per layer, the RoPE tables the layers use, the model-wide norm style, embedding and head, and the HF names of
// every tensor. Family parsers (src/model/family_*.cpp, registered in families.cpp) build it.
// Invariant: a ModelSpec is internally consistent (heads divide, dims set, rope parameters complete, one layer
// spec per layer, every layer's rope index names a table).
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/layer_spec.h"

namespace mt {

struct RopeSpec {
  std::string type = "default";          // default | linear | llama3 | yarn | longrope | dynamic
  double theta = 10000.0;
  double factor = 1.0;                   // linear, llama3, yarn, dynamic
  double low_freq_factor = 1.0;          // llama3
  double high_freq_factor = 4.0;         // llama3
  int64_t original_max_position_embeddings = 0;  // llama3, yarn, longrope, dynamic
  double beta_fast = 32.0;               // yarn
  double beta_slow = 1.0;                // yarn
  double attention_factor = 0.0;         // yarn, longrope; 0 = derived from factor as transformers does
  bool truncate = true;                  // yarn
  std::vector<double> short_factor, long_factor;  // longrope: per-frequency divisors below / above the original length
  double partial_rotary_factor = 1.0;    // fraction of head_dim that rotates
  int64_t head_dim = 0;                  // head_dim of the layers using the table
  bool interleaved = false;              // rotate pairs (2i, 2i+1) (GLM) instead of (i, i + rot_dim/2)
  int64_t rot_dim() const { return static_cast<int64_t>(static_cast<double>(head_dim) * partial_rotary_factor); }
  // longrope and dynamic tables depend on the longest position of a batch
  bool depends_on_length() const { return type == "longrope" || type == "dynamic"; }
};

enum class NormStyle {
  weight,               // x̂·w (Llama: x̂ rounded to the compute dtype before the product)
  one_plus_weight,      // x̂·(1 + w) (Gemma)
  weight_fp32_product,  // x̂·w formed in fp32 and rounded once (OLMo 2/3's Olmo2RMSNorm: (w·x̂).to(dtype))
};

// The kind of every hidden-size norm of the model (each layer's and the final one).
enum class NormKind {
  rms,               // RMSNorm, styled by NormStyle
  layer,             // LayerNorm without bias (CohereLayerNorm): (x − mean)·rsqrt(var + eps)·w
  layer_with_bias,   // LayerNorm with bias (nn.LayerNorm: StarCoder2): "<norm>.bias" follows "<norm>.weight"
};

// How fused expert tensors lay out each expert's matrices: rows, gate_up_proj [E, 2I, H] (its gate rows, then its up
// rows) and down_proj [E, H, I] (Qwen3.5-MoE); columns, [E, H, 2I] (gate | up columns) and [E, I, H], each the
// transpose of nn.Linear's (Llama 4); interleaved_columns, the same with gate and up columns alternating (GPT-OSS).
enum class FusedExpertLayout { rows, columns, interleaved_columns };

// The HF tensor names of a family. Layer tensors are "<layer_prefix><i>.<name>.weight" (and ".bias").
struct TensorNames {
  std::string embedding = "model.embed_tokens.weight";
  std::string final_norm = "model.norm.weight";
  std::string lm_head = "lm_head.weight";
  std::string layer_prefix = "model.layers.";
  std::string input_norm = "input_layernorm";
  std::string attn_out_norm;                          // post_norms only
  std::string mlp_norm = "post_attention_layernorm";
  std::string mlp_out_norm;                           // post_norms only
  std::string q = "self_attn.q_proj", k = "self_attn.k_proj", v = "self_attn.v_proj";
  std::string qkv;                                    // fused q|k|v rows in one tensor; "" = separate q, k, v
  bool qkv_grouped = false;                           // fused rows grouped by kv head: per group its q heads, k, v
  std::string o = "self_attn.o_proj";
  std::string q_norm = "self_attn.q_norm", k_norm = "self_attn.k_norm";
  std::string gate = "mlp.gate_proj", up = "mlp.up_proj", down = "mlp.down_proj";
  std::string gate_up;                                // fused gate|up rows in one tensor; "" = separate
  // Gated DeltaNet layers (Qwen3.5: separate projections; Qwen3-Next: dn_qkvz and dn_ba fused, grouped by k head).
  std::string dn_qkv = "linear_attn.in_proj_qkv", dn_z = "linear_attn.in_proj_z";
  std::string dn_b = "linear_attn.in_proj_b", dn_a = "linear_attn.in_proj_a";
  std::string dn_qkvz, dn_ba;                         // fused; "" = the separate tensors above
  std::string dn_conv = "linear_attn.conv1d", dn_a_log = "linear_attn.A_log", dn_dt_bias = "linear_attn.dt_bias";
  std::string dn_norm = "linear_attn.norm", dn_out = "linear_attn.out_proj";
  // Lightning attention layers (MiniMax): qkv_proj (per head q | k | v), output_gate, the norm, out_proj.
  std::string lt_qkv = "self_attn.qkv_proj", lt_gate = "self_attn.output_gate", lt_norm = "self_attn.norm",
              lt_out = "self_attn.out_proj";
  // Mixture-of-experts layers: "<router>.weight", "<experts><e>.<expert_gate>.weight" (and up, down), the shared
  // expert "<shared_gate_proj>.weight" (and up, down) and its gate "<shared_expert_gate>.weight".
  std::string router = "mlp.gate", experts = "mlp.experts.";
  std::string router_score_bias = "mlp.gate.e_score_correction_bias";  // sigmoid_group routers (a buffer: never trained)
  std::string expert_gate = "gate_proj", expert_up = "up_proj", expert_down = "down_proj";
  // Multi-head latent attention layers (MlaSpec; the query projection without a low rank is `q`, the output `o`).
  std::string mla_q_a = "self_attn.q_a_proj", mla_q_a_norm = "self_attn.q_a_layernorm", mla_q_b = "self_attn.q_b_proj";
  std::string mla_kv_a = "self_attn.kv_a_proj_with_mqa", mla_kv_a_norm = "self_attn.kv_a_layernorm";
  std::string mla_kv_b = "self_attn.kv_b_proj";
  std::string sinks = "self_attn.sinks";              // attention sinks [n_heads] (AttentionSpec::sinks)
  std::string shared_gate_proj = "mlp.shared_expert.gate_proj", shared_up_proj = "mlp.shared_expert.up_proj",
              shared_down_proj = "mlp.shared_expert.down_proj";
  std::string shared_expert_gate = "mlp.shared_expert_gate";
  // The experts as two 3-D tensors without ".weight", "<experts><fused_gate_up>" and "<experts><fused_down>"
  // (with "_bias" of each where MoeSpec::expert_bias), instead of one tensor per expert; their layout in
  // fused_layout. either_expert_layout: the family's checkpoints come both ways (one tensor per expert is what
  // transformers' save_pretrained writes for Qwen3.5-MoE) and match_tensor_names picks the one the weights use.
  bool fused_experts = false, either_expert_layout = false;
  FusedExpertLayout fused_layout = FusedExpertLayout::rows;
  std::string fused_gate_up = "gate_up_proj", fused_down = "down_proj";
  // Older checkpoints of the family name the same tensors under another prefix: {prefix here, prefix there}
  // (match_tensor_names picks the one the weights use).
  std::vector<std::pair<std::string, std::string>> legacy_prefixes;
};

struct ModelSpec {
  std::string architecture;              // e.g. "Qwen2ForCausalLM"
  std::string family;                    // the family's model_type, e.g. "qwen2" (families.cpp)
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double initializer_range = 0.02;
  bool tie_word_embeddings = false;
  std::vector<LayerSpec> layers;         // one per layer
  std::vector<RopeSpec> rope_tables;     // what AttentionSpec::rope indexes
  NormStyle norm_style = NormStyle::weight;  // every RMSNorm of the model (layers, q/k norms, final norm)
  NormKind norm_kind = NormKind::rms;    // the hidden-size norms; rms_norm_eps is their eps whatever the kind
  int64_t padding_idx = -1;              // pad_token_id: nn.Embedding's padding_idx, a row the lookup never trains
  double embedding_scale = 1.0;          // embeddings multiply by it (Gemma: √hidden_size, in the compute dtype)
  // false: the multiplier is a Python float that torch applies unrounded (Granite's embedding_multiplier)
  bool embedding_scale_in_compute_dtype = true;
  double logit_scale = 1.0;              // logits × logit_scale before the soft-cap (Granite: 1 / logits_scaling;
                                         // Cohere: logit_scale)
  double final_logit_softcap = 0.0;      // logits -> cap·tanh(logits/cap); 0 = none
  bool normalized_head = false;          // logits use the LM head's rows normalised to unit length (Baichuan 2)
  bool trust_remote_code = false;        // the family's modeling code is not part of transformers
  // Mixture-of-experts models: the router's load-balancing loss (transformers' load_balancing_loss_func) is added
  // to the loss with router_aux_loss_coef where config.json says output_router_logits (or the run config's
  // training.moe_aux_loss_coef sets the coefficient).
  bool output_router_logits = false;
  double router_aux_loss_coef = 0.0;
  // The checkpoint holds more than the text model (a vision tower, a projector): those tensors stay frozen and are
  // carried through export unchanged.
  bool carries_other_tensors = false;
  // config.json's quantization_config says quant_method fp8: F8_E4M3 tensors come with 128×128 block scales and are
  // dequantised on load (model/fp8_blocks.h); export writes them unquantised without quantization_config.
  bool fp8_block_weights = false;
  TensorNames names;
  std::string config_json;               // the original config.json text

  float norm_weight_offset() const { return norm_style == NormStyle::one_plus_weight ? 1.0f : 0.0f; }
};

// `origin` names the file in errors; `trust_remote_code` is model.trust_remote_code of the run config.
ModelSpec parse_model_spec(const nlohmann::json& config, const std::string& origin, bool trust_remote_code = false);
ModelSpec load_model_spec(const std::filesystem::path& config_json, bool trust_remote_code = false);
int64_t count_parameters(const ModelSpec& spec);
// The parameters one token computes with: all but the experts a mixture-of-experts layer does not route it to
// (num_experts − top_k of them); count_parameters for dense models.
int64_t count_active_parameters(const ModelSpec& spec);
// Parameters of the experts no token of a layer uses: count_parameters − count_active_parameters.
int64_t inactive_expert_parameters(const ModelSpec& spec);
// The model cut to its layers [first, first + layers) (bench --first-layer, --layers), as valid as the original;
// first_layers: from layer 0.
ModelSpec layer_range(const ModelSpec& spec, int64_t first, int64_t layers);
ModelSpec first_layers(const ModelSpec& spec, int64_t layers);
// One line for the log: the distinct layer kinds in order, e.g. "attention 32/8 heads × 128, window 4096, MLP
// 14336 silu ×24; attention 32/8 heads × 128, MLP 14336 silu ×8".
std::string describe_layers(const ModelSpec& spec);
// Where the weights name the model's tensors under a legacy prefix (names.legacy_prefixes), renames spec.names
// to it, and where the family's experts come either way (names.either_expert_layout), picks the layout the weights'
// first MoE layer uses; `has_tensor` asks the weights. Names the weights already use, or no match at all, leave
// spec unchanged.
void match_tensor_names(ModelSpec& spec, const std::function<bool(const std::string&)>& has_tensor);

}  // namespace mt
