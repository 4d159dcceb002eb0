// CPU AdamW over one contiguous slice, with torch.optim.AdamW's exact single-tensor semantics.
// Invariant: one fused pass reads the gradient once and writes master, m, v (and the bf16 stream copy
// when asked); the result does not depend on the number of threads.
#pragma once
#include <cstdint>

namespace mt {

struct AdamWStep {
  double lr = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0.0;   // applied only where the slice decays
  int64_t step = 1;            // 1-based count of updates applied so far, this one included
  float grad_scale = 1.0f;     // clipping coefficient, multiplied into the gradient first
};

// param, exp_avg, exp_avg_sq, grad: n floats. bf16_out (may be null): receives the updated parameter
// rounded to bf16 (the copy that streams to the GPU).
void adamw_update(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n,
                  const AdamWStep& hp, bool decay, std::uint16_t* bf16_out);

}  // namespace mt
