// RoPE inverse frequencies and cos/sin tables, step for step as transformers 5 computes them in float32
// (modeling_rope_utils.py: default, linear, llama3, yarn; torch's `s / t` is `reciprocal(t) * s`).
// Invariant: every intermediate is rounded to float where torch holds a float32 tensor.
#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace mt {
namespace {

// base ** (arange(0, dim, 2).float() / dim), in float32.
std::vector<float> position_frequencies(double base, int64_t dim) {
  std::vector<float> out(static_cast<size_t>(dim / 2));
  const auto fbase = static_cast<double>(static_cast<float>(base));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    out[static_cast<size_t>(i)] = static_cast<float>(std::pow(fbase, static_cast<double>(exponent)));
  }
  return out;
}

void apply_llama3(const RopeSpec& r, std::vector<float>& inv_freq) {
  const auto factor = static_cast<float>(r.factor);
  const auto low = static_cast<float>(r.low_freq_factor), high = static_cast<float>(r.high_freq_factor);
  const auto old_context = static_cast<double>(r.original_max_position_embeddings);
  const auto low_freq_wavelen = static_cast<float>(old_context / r.low_freq_factor);
  const auto high_freq_wavelen = static_cast<float>(old_context / r.high_freq_factor);
  const auto two_pi = static_cast<float>(2.0 * std::numbers::pi);
  for (float& f : inv_freq) {
    const float wavelen = (1.0f / f) * two_pi;
    const float scaled = wavelen > low_freq_wavelen ? f / factor : f;
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    if (!medium) {
      f = scaled;
      continue;
    }
    const float smooth = ((1.0f / wavelen) * static_cast<float>(old_context) - low) / (high - low);
    f = (1.0f - smooth) * scaled / factor + smooth * scaled;
  }
}

void apply_yarn(const RopeSpec& r, int64_t dim, std::vector<float>& inv_freq) {
  const double base = r.theta;
  const auto original = static_cast<double>(r.original_max_position_embeddings);
  const auto correction_dim = [&](double rotations) {
    return (static_cast<double>(dim) * std::log(original / (rotations * 2.0 * std::numbers::pi))) /
           (2.0 * std::log(base));
  };
  double low = correction_dim(r.beta_fast), high = correction_dim(r.beta_slow);
  if (r.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // transformers' guard against a zero-width ramp

  const std::vector<float> pos = position_frequencies(base, dim);
  const auto factor = static_cast<float>(r.factor);
  const auto flow = static_cast<float>(low), width = static_cast<float>(high - low);
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const float extrapolation = 1.0f / pos[i];
    const float interpolation = 1.0f / (factor * pos[i]);
    const float ramp = std::clamp((static_cast<float>(i) - flow) / width, 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    inv_freq[i] = interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
}

}  // namespace

int64_t rope_table_key(const RopeSpec& r, int64_t longest) {
  if (!r.depends_on_length() || longest <= r.original_max_position_embeddings) return 0;
  return r.type == "longrope" ? 1 : longest;
}

std::vector<float> rope_inverse_frequencies(const RopeSpec& r, double* attention_scaling, int64_t longest) {
  const int64_t dim = r.rot_dim();
  MT_ASSERT(dim >= 2 && dim % 2 == 0, "rotary dim {} of head_dim {}", dim, r.head_dim);
  double base = r.theta;
  if (r.type == "dynamic" && rope_table_key(r, longest) != 0) {
    // transformers' _compute_dynamic_ntk_parameters with seq_len = longest
    const auto original = static_cast<double>(r.original_max_position_embeddings);
    base *= std::pow(r.factor * static_cast<double>(longest) / original - (r.factor - 1.0),
                     static_cast<double>(dim) / static_cast<double>(dim - 2));
  }
  std::vector<float> inv_freq = position_frequencies(base, dim);
  double scaling = 1.0;
  if (r.type == "longrope") {  // 1 / (ext_factors · base^(2i/d)) in float32
    const std::vector<double>& ext = rope_table_key(r, longest) != 0 ? r.long_factor : r.short_factor;
    for (size_t i = 0; i < inv_freq.size(); ++i) inv_freq[i] = 1.0f / (static_cast<float>(ext[i]) * inv_freq[i]);
    scaling = r.attention_factor;
  } else {
    for (float& f : inv_freq) f = 1.0f / f;
  }
  if (r.type == "linear") {
    for (float& f : inv_freq) f /= static_cast<float>(r.factor);
  } else if (r.type == "llama3") {
    apply_llama3(r, inv_freq);
  } else if (r.type == "yarn") {
    apply_yarn(r, dim, inv_freq);
    scaling = r.attention_factor != 0.0 ? r.attention_factor : r.factor <= 1.0 ? 1.0 : 0.1 * std::log(r.factor) + 1.0;
  } else {
    MT_ASSERT(r.type == "default" || r.type == "longrope" || r.type == "dynamic", "rope type '{}' passed validation",
              r.type);
  }
  if (attention_scaling) *attention_scaling = scaling;
  return inv_freq;
}

RopeTable make_rope_table(const RopeSpec& rope, int64_t max_positions, int64_t longest) {
  MT_ASSERT(max_positions >= 0);
  double scaling = 1.0;
  const std::vector<float> inv_freq = rope_inverse_frequencies(rope, &scaling, longest);
  const auto half = static_cast<int64_t>(inv_freq.size());
  const auto fscaling = static_cast<float>(scaling);
  RopeTable t;
  t.rot_dim = 2 * half;
  t.max_positions = max_positions;
  t.cos.resize(static_cast<size_t>(max_positions * half));
  t.sin.resize(t.cos.size());
#pragma omp parallel for schedule(static) if (max_positions * half > (int64_t{1} << 16))
  for (int64_t p = 0; p < max_positions; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<float>(p) * inv_freq[static_cast<size_t>(i)];  // fp32 product, as torch
      const auto k = static_cast<size_t>(p * half + i);
      t.cos[k] = static_cast<float>(std::cos(angle)) * fscaling;
      t.sin[k] = static_cast<float>(std::sin(angle)) * fscaling;
    }
  }
  return t;
}

}  // namespace mt
