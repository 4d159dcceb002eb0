// CPU AdamW over one contiguous range with torch.optim.AdamW's single-tensor semantics, and the fixed-order block
// sums of squares of the global norm. An update is one fused pass, adamw_update (reads p, m, v, g; writes p, m, v
// and the bf16 copy: 28 B per parameter, 30 with the copy), or two: adamw_params (reads p, m, v, g; writes p and the
// bf16 copy: what the next forward waits for) then adamw_moments (reads m, v, g; writes m, v). All three compute
// m' and v' with the same operations, so both ways give bitwise the same p', m', v'. Invariants: every element
// takes the same IEEE operations wherever it falls (vector body, tail, any thread), so results do not depend on
// slicing or threads; block_sum_of_squares depends only on its values.
#pragma once
#include <cstdint>

namespace mt {

struct AdamWStep {
  double lr = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0.0;   // applied only where the range decays
  int64_t step = 1;            // 1-based count of updates applied so far, this one included
  float grad_scale = 1.0f;     // clipping coefficient, multiplied into the gradient first
};

// The fp32 scalars of one step, from hp's fp64 as torch rounds them; every implementation of the element update
// (these passes, the CUDA kernel of GPU-resident regions) takes its operations in this order:
//   g = grad·scale; m' = m + m_weight·(g − m); v' = v·v_decay + (v_weight·g)·g;
//   p' = p·decay_factor + (neg_step_size·m') / (√v' / bc2_sqrt + eps).
struct AdamWCoefficients {
  float decay_factor, m_weight, v_decay, v_weight, neg_step_size, bc2_sqrt, eps, scale;
};
AdamWCoefficients adamw_coefficients(const AdamWStep& hp, bool decay);

// param, exp_avg, exp_avg_sq, grad: n floats. bf16_out (may be null): receives the updated parameter
// rounded to bf16 (the copy that streams to the GPU). m and v are left as they were. Threaded with the calling
// thread's OpenMP team (as adamw_moments).
void adamw_params(float* param, const float* exp_avg, const float* exp_avg_sq, const float* grad, int64_t n,
                  const AdamWStep& hp, bool decay, std::uint16_t* bf16_out);
// m ← m', v ← v': after adamw_params of the same step over the same range (which must read the old m, v).
void adamw_moments(float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n, const AdamWStep& hp);
// p, m, v ← p', m', v' in one pass (bf16_out as in adamw_params).
void adamw_update(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n,
                  const AdamWStep& hp, bool decay, std::uint16_t* bf16_out);

// Σ g² in fp64 over n values: 16 interleaved partial sums (element i goes to sum i mod 16), combined
// pairwise. Single-threaded; the optimizer calls it once per norm block.
double block_sum_of_squares(const float* g, int64_t n);

}  // namespace mt
