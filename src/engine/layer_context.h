// LayerContext: what every layer template needs besides weights and activations — the backend, the
// model's shape, and the RoPE tables in backend memory. Invariant: read-only during a step.
#pragma once
#include "backend/backend.h"
#include "model/model_spec.h"
#include "model/param_layout.h"

namespace mt {

struct LayerContext {
  Backend* backend = nullptr;
  const ModelSpec* spec = nullptr;
  const ParamLayout* layout = nullptr;
  const float* rope_cos = nullptr;  // [max_positions, rot_dim/2], backend memory
  const float* rope_sin = nullptr;
  int64_t rope_rot_dim = 0;
};

}  // namespace mt
