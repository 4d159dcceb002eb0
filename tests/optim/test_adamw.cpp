// AdamW against a scalar fp64 transcription of torch.optim.AdamW, every tail length, decay on/off,
// bf16 copy rounding (ties, NaN, Inf), results independent of how a range is cut (vector body or tail)
// and of the thread count, and the fixed-order block sums of squares.
#include <cmath>
#include <omp.h>
#include <random>
#include <vector>

#include "catch.h"
#include "core/dtype.h"
#include "optim/adamw.h"

namespace {

struct State {
  std::vector<float> p, m, v, g;
};

State random_state(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  State s{std::vector<float>(n), std::vector<float>(n), std::vector<float>(n), std::vector<float>(n)};
  for (int64_t i = 0; i < n; ++i) {
    s.p[i] = d(rng);
    s.m[i] = 0.1f * d(rng);
    s.v[i] = 0.01f * std::abs(d(rng));
    s.g[i] = d(rng);
  }
  return s;
}

// torch single-tensor AdamW in fp64.
void reference(State& s, const mt::AdamWStep& hp, bool decay) {
  const double bc1 = 1 - std::pow(hp.beta1, hp.step), bc2 = 1 - std::pow(hp.beta2, hp.step);
  for (size_t i = 0; i < s.p.size(); ++i) {
    const double g = double(s.g[i]) * hp.grad_scale;
    double p = s.p[i] * (1 - hp.lr * (decay ? hp.weight_decay : 0.0));
    const double m = hp.beta1 * s.m[i] + (1 - hp.beta1) * g;
    const double v = hp.beta2 * s.v[i] + (1 - hp.beta2) * g * g;
    p -= hp.lr / bc1 * m / (std::sqrt(v) / std::sqrt(bc2) + hp.eps);
    s.p[i] = float(p);
    s.m[i] = float(m);
    s.v[i] = float(v);
  }
}

mt::AdamWStep decayed_step(double lr, int64_t step, float grad_scale) {
  mt::AdamWStep hp;
  hp.lr = lr;
  hp.weight_decay = 0.1;
  hp.step = step;
  hp.grad_scale = grad_scale;
  return hp;
}

}  // namespace

TEST_CASE("the parameters pass leaves m and v; the moments pass then gives the fused pass's result bitwise",
          "[adamw]") {
  const mt::AdamWStep hp = decayed_step(1e-3, 2, 0.25f);
  for (int64_t n : {1, 15, 16, 17, 31, 33, 47, 64, 67, 1000, 5003}) {
    INFO("n=" << n);
    const State start = random_state(n, static_cast<uint32_t>(n));
    State fused = start, split = start;
    std::vector<uint16_t> fused_bf16(n), split_bf16(n);
    mt::adamw_update(fused.p.data(), fused.m.data(), fused.v.data(), fused.g.data(), n, hp, true, fused_bf16.data());
    mt::adamw_params(split.p.data(), split.m.data(), split.v.data(), split.g.data(), n, hp, true, split_bf16.data());
    CHECK(split.p == fused.p);
    CHECK(split_bf16 == fused_bf16);
    CHECK(split.m == start.m);
    CHECK(split.v == start.v);
    mt::adamw_moments(split.m.data(), split.v.data(), split.g.data(), n, hp);
    CHECK(split.m == fused.m);
    CHECK(split.v == fused.v);
    CHECK(split.p == fused.p);
  }
}

TEST_CASE("adamw matches torch's formula for every tail length", "[adamw]") {
  mt::AdamWStep hp;
  hp.lr = 1e-3;
  hp.weight_decay = 0.1;
  hp.step = 3;
  hp.grad_scale = 0.5f;
  for (int64_t n = 1; n <= 67; ++n) {
    for (bool decay : {false, true}) {
      State ours = random_state(n, static_cast<uint32_t>(n));
      State ref = ours;
      std::vector<uint16_t> bf16(n);
      mt::adamw_update(ours.p.data(), ours.m.data(), ours.v.data(), ours.g.data(), n, hp, decay, bf16.data());
      reference(ref, hp, decay);
      for (int64_t i = 0; i < n; ++i) {
        INFO("n=" << n << " i=" << i << " decay=" << decay);
        CHECK(std::abs(ours.p[i] - ref.p[i]) <= 1e-6f * (1 + std::abs(ref.p[i])));
        CHECK(std::abs(ours.m[i] - ref.m[i]) <= 1e-6f * (1 + std::abs(ref.m[i])));
        CHECK(std::abs(ours.v[i] - ref.v[i]) <= 1e-6f * (1 + std::abs(ref.v[i])));
        CHECK(bf16[i] == mt::f32_to_bf16(ours.p[i]));
      }
    }
  }
}

TEST_CASE("adamw first step moves each parameter by lr in the gradient's direction", "[adamw]") {
  float p = 1.0f, m = 0.0f, v = 0.0f, g = 0.5f;
  mt::AdamWStep hp;
  hp.lr = 0.1;
  mt::adamw_update(&p, &m, &v, &g, 1, hp, false, nullptr);
  CHECK(std::abs(p - 0.9f) < 1e-6f);
  CHECK(std::abs(m - 0.05f) < 1e-8f);
  CHECK(std::abs(v - 0.00025f) < 1e-9f);
}

TEST_CASE("adamw result does not depend on the thread count", "[adamw]") {
  const int64_t n = 10007;
  mt::AdamWStep hp;
  hp.lr = 1e-2;
  hp.weight_decay = 0.01;
  State one = random_state(n, 7), two = one;
  omp_set_num_threads(1);
  mt::adamw_update(one.p.data(), one.m.data(), one.v.data(), one.g.data(), n, hp, true, nullptr);
  omp_set_num_threads(2);
  mt::adamw_update(two.p.data(), two.m.data(), two.v.data(), two.g.data(), n, hp, true, nullptr);
  CHECK(one.p == two.p);
  CHECK(one.m == two.m);
  CHECK(one.v == two.v);
}

TEST_CASE("bf16 rounding is round-to-nearest-even, NaN stays NaN", "[dtype]") {
  CHECK(mt::f32_to_bf16(1.0f) == 0x3f80);
  // 1 + 2^-8 lies exactly between two bf16 values: ties go to the even mantissa (1.0).
  CHECK(mt::f32_to_bf16(1.00390625f) == 0x3f80);
  // 1 + 3·2^-8 ties between 1+2^-7 (odd) and 1+2^-6 (even): rounds up to even.
  CHECK(mt::f32_to_bf16(1.01171875f) == 0x3f82);
  CHECK(std::isnan(mt::bf16_to_f32(mt::f32_to_bf16(std::nanf("")))));
  CHECK(mt::bf16_to_f32(mt::f32_to_bf16(-2.5f)) == -2.5f);
}

TEST_CASE("adamw gives bitwise the same result however the range is cut", "[adamw]") {
  const mt::AdamWStep hp = decayed_step(3e-3, 5, 0.75f);
  const int64_t n = 131;
  const State start = random_state(n, 11);
  State whole = start;
  std::vector<uint16_t> whole_bf16(n);
  mt::adamw_update(whole.p.data(), whole.m.data(), whole.v.data(), whole.g.data(), n, hp, true, whole_bf16.data());
  for (int64_t cut = 0; cut <= n; ++cut) {
    State split = start;
    std::vector<uint16_t> bf16(n);
    for (auto [b, e] : {std::pair<int64_t, int64_t>{0, cut}, {cut, n}})
      mt::adamw_update(split.p.data() + b, split.m.data() + b, split.v.data() + b, split.g.data() + b, e - b, hp, true,
                       bf16.data() + b);
    INFO("cut at " << cut);
    CHECK(split.p == whole.p);
    CHECK(split.m == whole.m);
    CHECK(split.v == whole.v);
    CHECK(bf16 == whole_bf16);
  }
}

TEST_CASE("the bf16 copy rounds ties to even and keeps NaN, Inf and signed zero", "[adamw][dtype]") {
  // lr 0 and no decay leave every parameter as it is, so the copy is the rounding of the given values.
  const std::vector<float> values = {1.00390625f,  1.01171875f, -1.00390625f, 3.0f,       0.0f,     -0.0f,
                                     std::nanf(""), -std::nanf(""), INFINITY,   -INFINITY, 1e-40f,   -1e-40f,
                                     65504.0f,     3.3895314e38f, 1.0000001f,  0.99999994f};
  const auto n = static_cast<int64_t>(values.size());
  for (int64_t offset = 0; offset < 3; ++offset) {
    std::vector<float> p(values), m(n, 0.0f), v(n, 0.0f), g(n, 0.5f);
    std::vector<uint16_t> bf16(n);
    mt::AdamWStep hp;
    hp.lr = 0.0;
    mt::adamw_update(p.data() + offset, m.data() + offset, v.data() + offset, g.data() + offset, n - offset, hp, false,
                     bf16.data() + offset);
    for (int64_t i = offset; i < n; ++i) {
      INFO("value " << values[i]);
      CHECK(bf16[i] == mt::f32_to_bf16(values[i]));
    }
  }
  CHECK(mt::f32_to_bf16(1.00390625f) == 0x3f80);  // tie, even below
  CHECK(mt::f32_to_bf16(1.01171875f) == 0x3f82);  // tie, even above
}

TEST_CASE("block sums of squares: fp64 accuracy, every tail length, NaN and Inf propagate", "[norm]") {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<float> g(4096);
  for (float& x : g) x = d(rng);
  for (int64_t n = 0; n <= 4096; n += (n < 40 ? 1 : 397)) {
    double ref = 0;
    for (int64_t i = 0; i < n; ++i) ref += double(g[i]) * g[i];
    INFO("n=" << n);
    CHECK(std::abs(mt::block_sum_of_squares(g.data(), n) - ref) <= 1e-12 * (1 + ref));
  }
  g[17] = std::nanf("");
  CHECK(std::isnan(mt::block_sum_of_squares(g.data(), 4096)));
  g[17] = INFINITY;
  CHECK(std::isinf(mt::block_sum_of_squares(g.data(), 4096)));
}
