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

// inv_freq[rot_dim/2] and the attention scaling transformers computes for `rope`, for a batch whose longest
// position + 1 is `longest` (longrope switches to its long factors above the original length; dynamic NTK
// scaling grows the base above it; the other types ignore it).
std::vector<float> rope_inverse_frequencies(const RopeSpec& rope, double* attention_scaling, int64_t longest = 0);
RopeTable make_rope_table(const RopeSpec& rope, int64_t max_positions, int64_t longest = 0);
// What a table of `rope` depends on for such a batch: equal keys give equal tables.
int64_t rope_table_key(const RopeSpec& rope, int64_t longest);

}  // namespace mt
