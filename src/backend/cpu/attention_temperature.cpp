// Llama 4's attention temperature tuning on the host: each row scaled by log1p(floor((p + 1) / floor_scale))·attn_scale
// + 1, p the row's index within its sequence (transformers' torch.arange over the sequence dimension).
// Invariant: the factor is formed in fp32 step by step as transformers' fp32 ops do (add, divide, floor, log1p,
// multiply, add), the CUDA kernel in the same order.
#include <cmath>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"

namespace mt::cpu {

void attention_temperature(real* x, int64_t T, int64_t seq, int64_t width, real floor_scale, real attn_scale) {
  MT_ASSERT(T >= 0 && seq > 0 && T % seq == 0 && width > 0 && floor_scale > 0.f);
#pragma omp parallel for if (T * width > parallel_min_elems) schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    const real p = static_cast<real>(t % seq) + 1.0f;
    const real factor = std::log1p(std::floor(p / floor_scale)) * attn_scale + 1.0f;
    real* row = x + t * width;
#pragma omp simd
    for (int64_t d = 0; d < width; ++d) row[d] *= factor;
  }
}

}  // namespace mt::cpu
