// AdamW against a scalar fp64 transcription of torch.optim.AdamW, every tail length, decay on/off,
// bf16 copy rounding, and a thread-count-independent result.
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

}  // namespace

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
