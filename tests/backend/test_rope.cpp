// CPU backend RoPE, rotate_half and GLM's interleaved pairing: elements by hand (interleaved against transformers'
// modeling_glm4 formula), forward∘backward = identity for unit tables, backward is the adjoint (also for tables with
// attention scaling folded in), and dims past rot_dim pass through.
#include <cmath>

#include "backend/backend.h"
#include "backend/grad_check.h"
#include "catch.h"

using mt::test::approx_equal;
using mt::test::project;
using mt::test::random_floats;

namespace {

struct Tables {
  std::vector<float> cos, sin;
};

// HF default rope: angle(pos, i) = pos · base^(−2i/rot_dim), times amplitude (1 = pure rotation).
Tables make_tables(int64_t max_pos, int64_t rot_dim, double amplitude) {
  const int64_t half = rot_dim / 2;
  Tables t{std::vector<float>(max_pos * half), std::vector<float>(max_pos * half)};
  for (int64_t p = 0; p < max_pos; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = p * std::pow(10000.0, -2.0 * i / rot_dim);
      t.cos[p * half + i] = static_cast<float>(amplitude * std::cos(angle));
      t.sin[p * half + i] = static_cast<float>(amplitude * std::sin(angle));
    }
  }
  return t;
}

}  // namespace

TEST_CASE("rope rotates the first rot_dim dims with rotate_half", "[backend][rope]") {
  auto be = mt::make_cpu_backend();
  const int64_t T = 3, n_heads = 2, head_dim = 8, rot_dim = 6, half = 3;
  const std::vector<int32_t> pos = {0, 5, 9};
  const Tables tab = make_tables(10, rot_dim, 1.0);
  const auto x0 = random_floats(T * n_heads * head_dim, 1);
  auto x = x0;
  be->rope_forward(x.data(), tab.cos.data(), tab.sin.data(), pos.data(), T, n_heads, head_dim, rot_dim, false);

  // token 1, head 1, pair (1, 1 + half)
  const int64_t base = (1 * n_heads + 1) * head_dim;
  const float c = tab.cos[5 * half + 1], s = tab.sin[5 * half + 1];
  CHECK(approx_equal(x[base + 1], x0[base + 1] * c - x0[base + 1 + half] * s, 1e-6));
  CHECK(approx_equal(x[base + 1 + half], x0[base + 1 + half] * c + x0[base + 1] * s, 1e-6));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < n_heads; ++h) {
      for (int64_t d = rot_dim; d < head_dim; ++d) {
        const int64_t i = (t * n_heads + h) * head_dim + d;
        CHECK(x[i] == x0[i]);
      }
    }
  }
  for (int64_t i = 0; i < n_heads * head_dim; ++i) CHECK(x[i] == x0[i]);  // position 0 is the identity

  be->rope_backward(x.data(), tab.cos.data(), tab.sin.data(), pos.data(), T, n_heads, head_dim, rot_dim, false);
  for (size_t i = 0; i < x.size(); ++i) CHECK(approx_equal(x[i], x0[i], 1e-6));
}

TEST_CASE("rope_backward is the adjoint of rope_forward with scaled tables", "[backend][rope]") {
  auto be = mt::make_cpu_backend();
  const int64_t T = 4, n_heads = 3, head_dim = 6, rot_dim = 4;
  const std::vector<int32_t> pos = {2, 7, 1, 3};
  const Tables tab = make_tables(8, rot_dim, 1.3);
  const auto x = random_floats(T * n_heads * head_dim, 2), r = random_floats(T * n_heads * head_dim, 3);
  auto rx = x, rtr = r;
  be->rope_forward(rx.data(), tab.cos.data(), tab.sin.data(), pos.data(), T, n_heads, head_dim, rot_dim, false);
  be->rope_backward(rtr.data(), tab.cos.data(), tab.sin.data(), pos.data(), T, n_heads, head_dim, rot_dim, false);
  CHECK(approx_equal(project(r, rx), project(rtr, x), 1e-5));
}

TEST_CASE("rope interleaved rotates pairs (2i, 2i+1) as GLM-4's apply_rotary_pos_emb", "[backend][rope]") {
  auto be = mt::make_cpu_backend();
  const int64_t T = 4, n_heads = 3, head_dim = 10, rot_dim = 6, half = 3;  // partial rotary, odd pair count
  const std::vector<int32_t> pos = {0, 3, 11, 6};
  const Tables tab = make_tables(12, rot_dim, 1.0);
  const auto x0 = random_floats(T * n_heads * head_dim, 4);
  auto x = x0;
  be->rope_forward(x.data(), tab.cos.data(), tab.sin.data(), pos.data(), T, n_heads, head_dim, rot_dim, true);

  // transformers' modeling_glm4: cos = cos[..., :d/2].repeat_interleave(2); x·cos + rotate_half(x)·sin with
  // rotate_half(x) = stack(−x[1::2], x[0::2]).flatten(); then the pass-through dims are concatenated.
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t base = (t * n_heads + h) * head_dim;
      for (int64_t d = 0; d < head_dim; ++d) {
        if (d >= rot_dim) {
          CHECK(x[base + d] == x0[base + d]);
          continue;
        }
        const double c = tab.cos[pos[t] * half + d / 2], s = tab.sin[pos[t] * half + d / 2];
        const double rotated = d % 2 == 0 ? -double(x0[base + d + 1]) : double(x0[base + d - 1]);
        CHECK(approx_equal(x[base + d], x0[base + d] * c + rotated * s, 1e-6));
      }
    }
  }
  for (int64_t i = 0; i < n_heads * head_dim; ++i) CHECK(x[i] == x0[i]);  // position 0 is the identity

  SECTION("it is not the rotate_half pairing") {
    auto y = x0;
    be->rope_forward(y.data(), tab.cos.data(), tab.sin.data(), pos.data(), T, n_heads, head_dim, rot_dim, false);
    CHECK(mt::test::rel_err(y, x) > 1e-2);
  }
  SECTION("backward undoes a pure rotation") {
    be->rope_backward(x.data(), tab.cos.data(), tab.sin.data(), pos.data(), T, n_heads, head_dim, rot_dim, true);
    for (size_t i = 0; i < x.size(); ++i) CHECK(approx_equal(x[i], x0[i], 1e-6));
  }
}

TEST_CASE("rope interleaved backward is the adjoint with scaled tables and partial rot_dim", "[backend][rope]") {
  auto be = mt::make_cpu_backend();
  const int64_t T = 5, n_heads = 2, head_dim = 8, rot_dim = 4;  // GLM-4: partial_rotary_factor 0.5
  const std::vector<int32_t> pos = {4, 0, 2, 7, 5};
  const Tables tab = make_tables(8, rot_dim, 0.8);
  const auto x = random_floats(T * n_heads * head_dim, 5), r = random_floats(T * n_heads * head_dim, 6);
  auto rx = x, rtr = r;
  be->rope_forward(rx.data(), tab.cos.data(), tab.sin.data(), pos.data(), T, n_heads, head_dim, rot_dim, true);
  be->rope_backward(rtr.data(), tab.cos.data(), tab.sin.data(), pos.data(), T, n_heads, head_dim, rot_dim, true);
  CHECK(approx_equal(project(r, rx), project(rtr, x), 1e-5));
  for (int64_t t = 0; t < T; ++t) {  // the transpose leaves the pass-through dims of the cotangent alone too
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t base = (t * n_heads + h) * head_dim;
      for (int64_t d = rot_dim; d < head_dim; ++d) CHECK(rtr[base + d] == r[base + d]);
    }
  }
}
