// ParamLayout: the flat host regions of a model and the Hugging Face tensor that each slot holds.
// Region 0 is the embedding table, regions 1..L the decoder layers, region L+1 the final norm and
// (untied) LM head. Invariant: slots within a region are contiguous, in this fixed order, and every
// decoder region has the same offsets (DecoderOffsets), so one layer template serves all layers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/model_spec.h"

namespace mt {

enum class RegionKind { embedding, decoder_layer, head };
enum class InitKind { normal, zeros, ones };  // random init as transformers does it

struct ParamSlot {
  std::string hf_name;          // e.g. "model.layers.3.self_attn.q_proj.weight"
  std::vector<int64_t> shape;   // as in the HF checkpoint
  int64_t offset = 0;           // elements from the region's start
  int64_t numel = 0;
  bool weight_decay = false;    // matrices decay; norms and biases do not
  InitKind init = InitKind::normal;
};

struct Region {
  RegionKind kind = RegionKind::embedding;
  int64_t layer = -1;           // decoder layer index, -1 otherwise
  std::vector<ParamSlot> params;
  int64_t numel = 0;
};

// Offsets (elements) of each tensor inside a decoder region; -1 where the family has no such tensor.
struct DecoderOffsets {
  int64_t input_norm = -1, q = -1, q_bias = -1, k = -1, k_bias = -1, v = -1, v_bias = -1;
  int64_t o = -1, o_bias = -1, q_norm = -1, k_norm = -1, post_norm = -1;
  int64_t gate = -1, gate_bias = -1, up = -1, up_bias = -1, down = -1, down_bias = -1;
};

struct HeadOffsets {
  int64_t norm = -1;
  int64_t lm_head = -1;         // -1 when the embedding table is tied to the head
};

struct ParamLayout {
  std::vector<Region> regions;  // size num_layers + 2
  DecoderOffsets decoder;
  HeadOffsets head;
  int64_t total_numel = 0;
  int64_t largest_region_numel = 0;

  const Region& embedding() const { return regions.front(); }
  const Region& layer(int64_t i) const { return regions[static_cast<size_t>(i) + 1]; }
  const Region& head_region() const { return regions.back(); }
};

ParamLayout make_param_layout(const ModelSpec& spec);

}  // namespace mt
