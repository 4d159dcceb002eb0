// RoPE parameters from config.json as transformers' RotaryEmbeddingConfigMixin reads them: `rope_scaling` (old)
// or `rope_parameters` (new), with top-level rope_theta / partial_rotary_factor / original_max_position_embeddings
// filling what the dict lacks. Invariant: a returned RopeSpec is complete for its type (head_dim left to the caller).
#pragma once
#include <cstdint>

#include "model/config_keys.h"
#include "model/model_spec.h"

namespace mt {

// The dict that holds the rope parameters: rope_scaling if present, else rope_parameters ({} when neither).
ConfigKeys rope_dict(const ConfigKeys& top);
// A RopeSpec from `dict` (rope_dict(top), or one per-layer-type entry of it); rope_theta defaults to default_theta
// (the config class's default_theta) where neither the dict nor the top level gives it.
RopeSpec parse_rope(const ConfigKeys& top, const ConfigKeys& dict, int64_t max_positions,
                    double default_theta = 10000.0);

}  // namespace mt
