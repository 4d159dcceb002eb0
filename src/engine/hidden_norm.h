// The model's hidden-size norm (ModelSpec::norm_kind) as the layer templates use it: RMSNorm in the model's style, or
// LayerNorm with or without its bias, over T rows of hidden_size. A norm is named by the offset of its weight in a
// region; a LayerNorm's bias is the next hidden_size elements (param_layout.cpp lays it out there).
// Invariant: forward writes y; backward writes dx (plus `residual` where given, in the same pass) and ACCUMULATES the
// weight's (and bias's) gradient into the region's fp32 gradient.
#pragma once
#include <cstdint>

#include "engine/layer_context.h"

namespace mt {

struct HiddenNorm {
  const LayerContext& ctx;
  const void* w;  // the region's weights
  int64_t T;
  void forward(void* y, const void* x, int64_t offset) const;
  void backward(void* dx, real* dw, const void* dy, const void* x, int64_t offset,
                const void* residual = nullptr) const;
};

}  // namespace mt
