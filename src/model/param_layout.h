// ParamLayout: the flat host regions of a model and the Hugging Face tensor that each slot holds.
// Region 0 is the embedding table, regions 1..L the decoder layers, region L+1 the final norm and (untied) LM
// head. Each decoder region is laid out from its own LayerSpec, so regions may differ in size and content; its
// LayerOffsets say where each block's tensors sit. A fused HF tensor (Phi-3's qkv_proj, gate_up_proj) is one slot
// whose parts the offsets address; a slot with a RowGrouping holds its rows regrouped (InternLM2's wqkv).
// Invariant: slots within a region are contiguous and packed from offset 0; every offset points into its region.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/model_spec.h"

namespace mt {

enum class RegionKind { embedding, decoder_layer, head };
// Random init as transformers does it; a_log: log(U(0.01, 16)) (Gated DeltaNet's A_log).
enum class InitKind { normal, zeros, ones, a_log };

// HF rows come as `groups` groups of parts (part p: parts[p] rows each); the store holds part 0 of every group,
// then part 1 of every group, ...: contiguous q | k | v from a tensor grouped by kv head. Empty: same order.
struct RowGrouping {
  int64_t groups = 0;
  std::vector<int64_t> parts;
  bool operator==(const RowGrouping&) const = default;
};

// A stacked-experts tensor in x·W form, HF [E, in, out] ([E, out] for a bias: in = 1), as GPT-OSS stores its
// experts: the store holds per expert the transpose [out, in] (nn.Linear's form), and with `interleaved` (gate and up
// columns alternating, gate first) the gate rows then the up rows. experts == 0: not such a tensor.
struct ExpertColumns {
  int64_t experts = 0;
  bool interleaved = false;
  bool operator==(const ExpertColumns&) const = default;
};

struct ParamSlot {
  std::string hf_name;          // e.g. "model.layers.3.self_attn.q_proj.weight"
  std::vector<int64_t> shape;   // as in the HF checkpoint
  int64_t offset = 0;           // elements from the region's start
  int64_t numel = 0;
  bool weight_decay = false;    // matrices decay; norms and biases do not
  InitKind init = InitKind::normal;
  RowGrouping rows;             // how the store orders the HF rows
  ExpertColumns expert_columns{};  // how the store orders a stacked-experts tensor
  bool reordered() const { return !rows.parts.empty() || expert_columns.experts > 0; }  // store order != HF order
  bool operator==(const ParamSlot&) const = default;
};

// Offsets (elements) of each tensor inside a decoder region; -1 where the layer has no such tensor.
struct AttentionOffsets {
  int64_t q = -1, q_bias = -1, k = -1, k_bias = -1, v = -1, v_bias = -1, o = -1, o_bias = -1;
  int64_t q_norm = -1, k_norm = -1;
  int64_t sinks = -1;                         // [n_heads] attention sinks (GPT-OSS)
  int64_t out_gate = -1, out_gate_bias = -1;  // output_gate: the gate rows of q_proj
  bool operator==(const AttentionOffsets&) const = default;
};
// Gated DeltaNet: in_proj q|k|v rows, z rows, b rows directly followed by a rows (one [2·n_v, H] matrix), the conv
// weight [conv_dim, K], A_log and dt_bias [n_v], the gated norm [v_head_dim], out_proj.
struct DeltaNetOffsets {
  int64_t qkv = -1, z = -1, ba = -1, conv = -1, a_log = -1, dt_bias = -1, norm = -1, out = -1;
  bool operator==(const DeltaNetOffsets&) const = default;
};
// Lightning attention (LightningSpec): qkv_proj [3·width, H] (per head q | k | v, as the op reads it), output_gate
// [width, H], the norm [width], out_proj [H, width].
struct LightningOffsets {
  int64_t qkv = -1, gate = -1, norm = -1, out = -1;
  bool operator==(const LightningOffsets&) const = default;
};
// Multi-head latent attention (MlaSpec): the query projection's no-rope rows of every head, then its rope rows
// (q_proj's, or q_b_proj's after q_a_proj [q_lora_rank, H] and its norm); kv_a_proj_with_mqa's latent rows, then
// its rotary-key rows (and their biases); kv_a_layernorm; kv_b_proj's key rows of every head, then its value rows;
// o_proj [H, heads·v_head_dim] (and its bias).
struct MlaOffsets {
  int64_t q_a = -1, q_a_bias = -1, q_a_norm = -1;
  int64_t q_nope = -1, q_rope = -1;
  int64_t kv_latent = -1, kv_rope = -1, kv_latent_bias = -1, kv_rope_bias = -1, kv_norm = -1;
  int64_t k_nope = -1, v = -1;
  int64_t o = -1, o_bias = -1;
  bool operator==(const MlaOffsets&) const = default;
};
struct MlpOffsets {
  int64_t gate = -1, gate_bias = -1, up = -1, up_bias = -1, down = -1, down_bias = -1;
  bool operator==(const MlpOffsets&) const = default;
};
// A mixture-of-experts feed-forward: the router [E, H] (and its bias [E]); expert e's gate [I, H] and up [I, H] start
// at experts + e·expert_stride + gate (up), its down [H, I] at experts + e·down_stride + down; expert biases (GPT-OSS)
// gate [I] and up [I] at gate_bias (up_bias) + e·bias_stride, down [H] at down_bias + e·H; the shared expert and its
// gate [1, H]. One slot per expert tensor: gate, up, down adjacent, down_stride == expert_stride; the fused 3-D
// tensors (names.fused_experts, any FusedExpertLayout): expert_stride 2·I·H, down_stride H·I. Either way up == gate +
// I·H (and up_bias == gate_bias + I, the shared expert's up right after its gate): the MoE block reads [W_gate; W_up]
// as one [2I, H] matrix per expert.
struct MoeOffsets {
  int64_t router = -1, router_bias = -1;
  int64_t score_bias = -1;  // [E] sigmoid_group routers' e_score_correction_bias (its gradient stays 0)
  int64_t experts = -1, expert_stride = 0, down_stride = 0;
  int64_t gate = 0, up = 0, down = 0;
  int64_t gate_bias = -1, up_bias = -1, down_bias = -1, bias_stride = 0;
  MlpOffsets shared;
  int64_t shared_gate = -1;
  int64_t gate_of(int64_t e) const { return experts + e * expert_stride + gate; }
  int64_t up_of(int64_t e) const { return experts + e * expert_stride + up; }
  int64_t down_of(int64_t e) const { return experts + e * down_stride + down; }
  bool operator==(const MoeOffsets&) const = default;
};
struct LayerOffsets {
  int64_t input_norm = -1, attn_out_norm = -1, mlp_norm = -1, mlp_out_norm = -1;
  AttentionOffsets attention;
  MlpOffsets mlp;   // dense layers
  MoeOffsets moe;   // mixture-of-experts layers
  DeltaNetOffsets deltanet;
  MlaOffsets mla;
  LightningOffsets lightning;
  bool operator==(const LayerOffsets&) const = default;
};

struct Region {
  RegionKind kind = RegionKind::embedding;
  int64_t layer = -1;           // decoder layer index, -1 otherwise
  std::vector<ParamSlot> params;
  int64_t numel = 0;
  LayerOffsets offsets;         // decoder layers only
  bool operator==(const Region&) const = default;
};

struct HeadOffsets {
  int64_t norm = -1;
  int64_t lm_head = -1;         // -1 when the embedding table is tied to the head
  bool operator==(const HeadOffsets&) const = default;
};

struct ParamLayout {
  std::vector<Region> regions;  // size num_layers + 2
  HeadOffsets head;
  int64_t total_numel = 0;
  int64_t largest_region_numel = 0;
  int64_t largest_layer_numel = 0;  // the largest decoder region

  const Region& embedding() const { return regions.front(); }
  const Region& layer(int64_t i) const { return regions[static_cast<size_t>(i) + 1]; }
  const Region& head_region() const { return regions.back(); }
  bool operator==(const ParamLayout&) const = default;
};

ParamLayout make_param_layout(const ModelSpec& spec);

// A region's slots merged into maximal runs of adjacent slots that decay alike: [begin, end) elements from the
// region's start. AdamW runs once per run instead of once per tensor (an MoE region holds hundreds of expert
// tensors), which leaves every element's operations as they were.
struct DecayRun {
  int64_t begin = 0, end = 0;
  bool weight_decay = false;
};
std::vector<DecayRun> decay_runs(const Region& region);

// A slot's values between the HF order and the store's (identity unless reordered()); src and dst differ.
void hf_rows_to_store(const ParamSlot& slot, const float* hf, float* store);
void store_rows_to_hf(const ParamSlot& slot, const float* store, float* hf);

}  // namespace mt
