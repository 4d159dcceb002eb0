// RoPE tables: cos/sin of position × inverse frequency, for every rope type transformers supports that we do.
// Invariant: tables equal transformers' `cos`/`sin` (attention scaling folded in) to fp32 rounding.
#pragma once
#include <cstdint>
#include <vector>

#include "model/model_spec.h"

namespace mt {

struct RopeTable {
  int64_t rot_dim = 0;        // rotated dims per head (head_dim × partial_rotary_factor, even)
  int64_t max_positions = 0;
  std::vector<float> cos;     // [max_positions, rot_dim/2]
  std::vector<float> sin;     // [max_positions, rot_dim/2]
};

// inv_freq[rot_dim/2] and the attention scaling transformers computes for spec.rope.
std::vector<float> rope_inverse_frequencies(const ModelSpec& spec, double* attention_scaling);
RopeTable make_rope_table(const ModelSpec& spec, int64_t max_positions);

}  // namespace mt
