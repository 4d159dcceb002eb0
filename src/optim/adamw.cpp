// AdamW, fused: torch's single-tensor order of fp32 operations, scalars in fp64 rounded to fp32 as torch does.
// Compiler-vectorised loops cloned for AVX-512 / AVX2 / x86-64 (target_clones; intrinsics measured no faster,
// docs/PERFORMANCE.md), built with -fno-math-errno (sqrt vectorises) and -ffp-contract=off (no clone fuses a
// multiply-add that the scalar tail would round twice).
#include "optim/adamw.h"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>

namespace mt {
namespace {

struct Coefficients {
  float decay_factor, m_weight, v_decay, v_weight, neg_step_size, bc2_sqrt, eps, scale;
};

// core/dtype.h's f32_to_bf16 without the early return, so that the loop has no control flow.
inline std::uint16_t to_bf16(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const std::uint32_t quiet_nan = (u >> 16) | 0x40u;
  return static_cast<std::uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

template <bool kBf16>
inline void adamw_element(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t i,
                          const Coefficients& c, std::uint16_t* bf16_out) {
  const float g = grad[i] * c.scale;
  float p = param[i] * c.decay_factor;
  const float m = exp_avg[i] + c.m_weight * (g - exp_avg[i]);
  const float v = exp_avg_sq[i] * c.v_decay + c.v_weight * g * g;
  const float denom = std::sqrt(v) / c.bc2_sqrt + c.eps;
  p = p + c.neg_step_size * m / denom;
  exp_avg[i] = m;
  exp_avg_sq[i] = v;
  param[i] = p;
  if constexpr (kBf16) bf16_out[i] = to_bf16(p);
}

__attribute__((target_clones("avx512f", "avx2", "default")))
void adamw_range(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n, const Coefficients& c,
                 std::uint16_t* bf16_out) {
  if (bf16_out) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) adamw_element<true>(param, exp_avg, exp_avg_sq, grad, i, c, bf16_out);
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) adamw_element<false>(param, exp_avg, exp_avg_sq, grad, i, c, nullptr);
  }
}

}  // namespace

void adamw_update(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n,
                  const AdamWStep& hp, bool decay, std::uint16_t* bf16_out) {
  const double bias_correction1 = 1.0 - std::pow(hp.beta1, static_cast<double>(hp.step));
  const double bias_correction2 = 1.0 - std::pow(hp.beta2, static_cast<double>(hp.step));
  const Coefficients c{static_cast<float>(1.0 - hp.lr * (decay ? hp.weight_decay : 0.0)),
                       static_cast<float>(1.0 - hp.beta1),
                       static_cast<float>(hp.beta2),
                       static_cast<float>(1.0 - hp.beta2),
                       static_cast<float>(-(hp.lr / bias_correction1)),
                       static_cast<float>(std::sqrt(bias_correction2)),
                       static_cast<float>(hp.eps),
                       hp.grad_scale};
  // Chunks of whole cache lines handed out dynamically, so that a thread slowed by another on its core (the
  // engine's, the pipeline's) delays the range by one chunk, not by its whole share; small ranges run on the
  // calling thread. Every element takes the same operations wherever the cuts fall.
  constexpr int64_t kChunk = 1 << 16;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const int threads = static_cast<int>(std::clamp<int64_t>(chunks / 2, 1, omp_get_max_threads()));
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (threads > 1)
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t begin = k * kChunk, end = std::min(n, begin + kChunk);
    adamw_range(param + begin, exp_avg + begin, exp_avg_sq + begin, grad + begin, end - begin, c,
                bf16_out ? bf16_out + begin : nullptr);
  }
}

__attribute__((target_clones("avx512f", "avx2", "default")))
double block_sum_of_squares(const float* g, int64_t n) {
  double s[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) s[j] += static_cast<double>(g[i + j]) * static_cast<double>(g[i + j]);
  for (int j = 0; i + j < n; ++j) s[j] += static_cast<double>(g[i + j]) * static_cast<double>(g[i + j]);
  for (int w = 8; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) s[j] += s[j + w];
  return s[0];
}

}  // namespace mt
