// AdamW as one fused pass or as two passes over the same inputs: torch's single-tensor order of fp32 operations,
// scalars in fp64 rounded to fp32 as torch does; every pass computes m' and v' with the same operations.
// Compiler-vectorised loops cloned for AVX-512 / AVX2 / x86-64 (target_clones; intrinsics measured no faster,
// docs/PERFORMANCE.md), a cache line at a time with a software prefetch 2 KiB ahead on every stream (measured
// faster than the hardware prefetchers alone), built with -fno-math-errno (sqrt vectorises) and
// -ffp-contract=off (no clone fuses a multiply-add that the scalar tail would round twice).
#include "optim/adamw.h"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>

namespace mt {
namespace {

using Coefficients = AdamWCoefficients;

// core/dtype.h's f32_to_bf16 without the early return, so that the loop has no control flow.
inline std::uint16_t to_bf16(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const std::uint32_t quiet_nan = (u >> 16) | 0x40u;
  return static_cast<std::uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

// One element: m' and v' from g, m, v; p' (and its bf16 copy) when kParams; m', v' stored when kMoments.
template <bool kParams, bool kMoments, bool kBf16>
inline void adamw_element(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t i,
                          const Coefficients& c, std::uint16_t* bf16_out) {
  const float g = grad[i] * c.scale;
  const float m = exp_avg[i] + c.m_weight * (g - exp_avg[i]);
  const float v = exp_avg_sq[i] * c.v_decay + c.v_weight * g * g;
  if constexpr (kParams) {
    float p = param[i] * c.decay_factor;
    const float denom = std::sqrt(v) / c.bc2_sqrt + c.eps;
    p = p + c.neg_step_size * m / denom;
    param[i] = p;
    if constexpr (kBf16) bf16_out[i] = to_bf16(p);
  }
  if constexpr (kMoments) {
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
  }
}

// One pass over n elements, a 64-byte line of every stream at a time, prefetching each stream kAhead elements
// ahead (clamped to the range: a prefetch never faults, but the address stays inside the arrays); the tail
// takes the same operations one element at a time.
template <bool kParams, bool kMoments, bool kBf16>
inline void adamw_range(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n,
                        const Coefficients& c, std::uint16_t* bf16_out) {
  constexpr int64_t kLine = 16, kAhead = 512;
  int64_t i = 0;
  for (; i + kLine <= n; i += kLine) {
    const int64_t ahead = std::min(i + kAhead, n - 1);
    __builtin_prefetch(grad + ahead, 0);
    __builtin_prefetch(exp_avg + ahead, kMoments ? 1 : 0);
    __builtin_prefetch(exp_avg_sq + ahead, kMoments ? 1 : 0);
    if constexpr (kParams) __builtin_prefetch(param + ahead, 1);
    if constexpr (kBf16) __builtin_prefetch(bf16_out + ahead, 1);
#pragma omp simd
    for (int64_t j = i; j < i + kLine; ++j)
      adamw_element<kParams, kMoments, kBf16>(param, exp_avg, exp_avg_sq, grad, j, c, bf16_out);
  }
  for (; i < n; ++i) adamw_element<kParams, kMoments, kBf16>(param, exp_avg, exp_avg_sq, grad, i, c, bf16_out);
}

__attribute__((target_clones("avx512f", "avx2", "default")))
void params_range(float* param, const float* exp_avg, const float* exp_avg_sq, const float* grad, int64_t n,
                  const Coefficients& c, std::uint16_t* bf16_out) {
  float* m = const_cast<float*>(exp_avg);  // read only: kMoments is false
  float* v = const_cast<float*>(exp_avg_sq);
  if (bf16_out)
    adamw_range<true, false, true>(param, m, v, grad, n, c, bf16_out);
  else
    adamw_range<true, false, false>(param, m, v, grad, n, c, nullptr);
}

__attribute__((target_clones("avx512f", "avx2", "default")))
void moments_range(float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n, const Coefficients& c) {
  adamw_range<false, true, false>(nullptr, exp_avg, exp_avg_sq, grad, n, c, nullptr);
}

__attribute__((target_clones("avx512f", "avx2", "default")))
void fused_range(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n, const Coefficients& c,
                 std::uint16_t* bf16_out) {
  if (bf16_out)
    adamw_range<true, true, true>(param, exp_avg, exp_avg_sq, grad, n, c, bf16_out);
  else
    adamw_range<true, true, false>(param, exp_avg, exp_avg_sq, grad, n, c, nullptr);
}

}  // namespace

AdamWCoefficients adamw_coefficients(const AdamWStep& hp, bool decay) {
  const double bias_correction1 = 1.0 - std::pow(hp.beta1, static_cast<double>(hp.step));
  const double bias_correction2 = 1.0 - std::pow(hp.beta2, static_cast<double>(hp.step));
  return {static_cast<float>(1.0 - hp.lr * (decay ? hp.weight_decay : 0.0)),
          static_cast<float>(1.0 - hp.beta1),
          static_cast<float>(hp.beta2),
          static_cast<float>(1.0 - hp.beta2),
          static_cast<float>(-(hp.lr / bias_correction1)),
          static_cast<float>(std::sqrt(bias_correction2)),
          static_cast<float>(hp.eps),
          hp.grad_scale};
}

namespace {

// Runs body(begin, end) over [0, n) in chunks of whole cache lines handed out dynamically, so that a thread
// slowed by another on its core (the engine's, the pipeline's) delays the range by one chunk, not by its whole
// share; small ranges run on the calling thread.
template <typename Body>
void for_chunks(int64_t n, const Body& body) {
  constexpr int64_t kChunk = 1 << 16;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const int threads = static_cast<int>(std::clamp<int64_t>(chunks / 2, 1, omp_get_max_threads()));
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (threads > 1)
  for (int64_t k = 0; k < chunks; ++k) body(k * kChunk, std::min(n, (k + 1) * kChunk));
}

}  // namespace

void adamw_params(float* param, const float* exp_avg, const float* exp_avg_sq, const float* grad, int64_t n,
                  const AdamWStep& hp, bool decay, std::uint16_t* bf16_out) {
  const Coefficients c = adamw_coefficients(hp, decay);
  for_chunks(n, [&](int64_t b, int64_t e) {
    params_range(param + b, exp_avg + b, exp_avg_sq + b, grad + b, e - b, c, bf16_out ? bf16_out + b : nullptr);
  });
}

void adamw_moments(float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n, const AdamWStep& hp) {
  const Coefficients c = adamw_coefficients(hp, false);
  for_chunks(n, [&](int64_t b, int64_t e) { moments_range(exp_avg + b, exp_avg_sq + b, grad + b, e - b, c); });
}

void adamw_update(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n,
                  const AdamWStep& hp, bool decay, std::uint16_t* bf16_out) {
  const Coefficients c = adamw_coefficients(hp, decay);
  for_chunks(n, [&](int64_t b, int64_t e) {
    fused_range(param + b, exp_avg + b, exp_avg_sq + b, grad + b, e - b, c, bf16_out ? bf16_out + b : nullptr);
  });
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
