// CPU backend lightning attention (MiniMax): the forward against the direct sum o_t = Σ_{s≤t} w^(t−s)·(q_t·k_s)·v_s
// over silu'd q, k, v, the decay rates as transformers' get_slope_rate gives them, the backward against finite
// differences, padding (o = 0, no gradient, real tokens unchanged) and packed segments (the state restarts: a packed
// row equals its examples run alone); add_scaled.
#include <cmath>

#include "backend/backend.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/grad_check.h"
#include "catch.h"

using mt::LightningShape;
using mt::test::numeric_grad;
using mt::test::project;
using mt::test::random_floats;
using mt::test::rel_err;

namespace {

LightningShape shape(int64_t batch, int64_t seq, int64_t heads, int64_t d, double factor) {
  LightningShape s;
  s.batch = batch;
  s.seq = seq;
  s.n_heads = heads;
  s.head_dim = d;
  s.decay_factor = factor;
  return s;
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }

// The direct O(T²) sum in fp64 over each sequence's first len tokens (one segment).
std::vector<double> direct(const std::vector<float>& qkv, const LightningShape& s, const std::vector<int32_t>& lens) {
  const int64_t d = s.head_dim;
  std::vector<double> o(static_cast<size_t>(s.batch * s.seq * s.width()), 0.0);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.n_heads; ++h) {
      const double lambda = mt::lightning_decay_rate(h, s.n_heads, s.decay_factor);
      const auto x = [&](int64_t t, int64_t part, int64_t i) {
        return silu(qkv[static_cast<size_t>((b * s.seq + t) * s.row() + h * 3 * d + part * d + i)]);
      };
      for (int64_t t = 0; t < lens[static_cast<size_t>(b)]; ++t)
        for (int64_t u = 0; u <= t; ++u) {
          double qk = 0.0;
          for (int64_t i = 0; i < d; ++i) qk += x(t, 0, i) * x(u, 1, i);
          const double w = std::exp(-lambda * static_cast<double>(t - u)) * qk;
          for (int64_t j = 0; j < d; ++j) o[static_cast<size_t>((b * s.seq + t) * s.width() + h * d + j)] += w * x(u, 2, j);
        }
    }
  return o;
}

}  // namespace

TEST_CASE("lightning decay rates are transformers' get_slope_rate", "[backend][lightning]") {
  // 1 / 2^(8/n) to the power h + 1, times the layer's factor: n = 8 heads gives 2^-(h+1).
  for (int64_t h = 0; h < 8; ++h) CHECK(mt::lightning_decay_rate(h, 8, 1.0) == std::ldexp(1.0f, -static_cast<int>(h + 1)));
  // MiniMax-Text-01: 64 heads; layer 79 of 80: factor 1 − 79/(79 + 1e-5) + 1e-5.
  const double factor = 1.0 - 79.0 / (79.0 + 1e-5) + 1e-5;
  CHECK(std::abs(mt::lightning_decay_rate(0, 64, factor) - 0.9170040432 * factor) < 1e-6 * factor);
}

TEST_CASE("lightning attention forward is the decayed sum over silu'd q, k, v", "[backend][lightning]") {
  const LightningShape s = shape(2, 23, 3, 5, 0.6);
  const auto qkv = random_floats(s.batch * s.seq * s.row(), 11);
  std::vector<float> o(static_cast<size_t>(s.batch * s.seq * s.width()));
  mt::cpu::lightning_attention_forward(o.data(), qkv.data(), s);
  CHECK(rel_err(o, direct(qkv, s, {23, 23})) < 1e-5);
}

TEST_CASE("lightning attention on padding: o = 0, no gradient, real tokens as without padding",
          "[backend][lightning]") {
  LightningShape s = shape(2, 17, 2, 4, 1.0);
  const std::vector<int32_t> lens = {9, 17};
  s.seq_lens = lens.data();
  const auto qkv = random_floats(s.batch * s.seq * s.row(), 12);
  std::vector<float> o(static_cast<size_t>(s.batch * s.seq * s.width()), 7.f);
  mt::cpu::lightning_attention_forward(o.data(), qkv.data(), s);
  CHECK(rel_err(o, direct(qkv, s, lens)) < 1e-5);  // direct leaves padding 0
  const auto d_o = random_floats(static_cast<int64_t>(o.size()), 13);
  std::vector<float> d_qkv(qkv.size(), 7.f);
  mt::cpu::lightning_attention_backward(d_qkv.data(), d_o.data(), qkv.data(), s);
  for (int64_t t = 9; t < 17; ++t)
    for (int64_t c = 0; c < s.row(); ++c) CHECK(d_qkv[static_cast<size_t>(t * s.row() + c)] == 0.f);
}

TEST_CASE("lightning attention backward matches finite differences", "[backend][lightning]") {
  LightningShape s = shape(2, 9, 2, 3, 0.8);
  const std::vector<int32_t> lens = {9, 6};
  const std::vector<int32_t> segments = {0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 4};  // two rows of 9
  s.seq_lens = lens.data();
  s.segments = segments.data();
  auto qkv = random_floats(s.batch * s.seq * s.row(), 14);
  const auto r = random_floats(s.batch * s.seq * s.width(), 15);
  std::vector<float> o(r.size());
  const auto loss = [&] {
    mt::cpu::lightning_attention_forward(o.data(), qkv.data(), s);
    return project(r, o);
  };
  std::vector<float> d_qkv(qkv.size());
  mt::cpu::lightning_attention_backward(d_qkv.data(), r.data(), qkv.data(), s);
  CHECK(rel_err(d_qkv, numeric_grad(qkv, loss)) < 2e-3);
}

TEST_CASE("lightning attention restarts its state at every packed segment", "[backend][lightning]") {
  // One row packing examples of 5, 8 and 4 tokens equals the three examples each in its own row.
  const int64_t heads = 2, d = 4;
  LightningShape packed = shape(1, 17, heads, d, 0.9);
  const std::vector<int32_t> segments = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2};
  packed.segments = segments.data();
  const auto qkv = random_floats(packed.seq * packed.row(), 16);
  std::vector<float> o(static_cast<size_t>(packed.seq * packed.width())), d_qkv(qkv.size());
  const auto d_o = random_floats(static_cast<int64_t>(o.size()), 17);
  mt::cpu::lightning_attention_forward(o.data(), qkv.data(), packed);
  mt::cpu::lightning_attention_backward(d_qkv.data(), d_o.data(), qkv.data(), packed);
  int64_t t0 = 0;
  for (const int64_t n : {5, 8, 4}) {
    const LightningShape alone = shape(1, n, heads, d, 0.9);
    const std::vector<float> part(qkv.begin() + t0 * alone.row(), qkv.begin() + (t0 + n) * alone.row());
    const std::vector<float> d_part(d_o.begin() + t0 * alone.width(), d_o.begin() + (t0 + n) * alone.width());
    std::vector<float> o1(static_cast<size_t>(n * alone.width())), d1(part.size());
    mt::cpu::lightning_attention_forward(o1.data(), part.data(), alone);
    mt::cpu::lightning_attention_backward(d1.data(), d_part.data(), part.data(), alone);
    for (int64_t i = 0; i < n * alone.width(); ++i) CHECK(o[static_cast<size_t>(t0 * alone.width() + i)] == o1[static_cast<size_t>(i)]);
    for (int64_t i = 0; i < n * alone.row(); ++i) CHECK(d_qkv[static_cast<size_t>(t0 * alone.row() + i)] == d1[static_cast<size_t>(i)]);
    t0 += n;
  }
}

TEST_CASE("add_scaled: y = y_scale·y + x_scale·x", "[backend][elementwise]") {
  std::vector<float> y = {1.f, -2.f, 3.f}, x = {0.5f, 4.f, -1.f};
  mt::cpu::add_scaled(y.data(), x.data(), 2.f, 0.5f, 3);
  CHECK(y == std::vector<float>{1.5f, 7.f, -0.5f});
}
