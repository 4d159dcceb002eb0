// CPU backend fused head + cross-entropy: loss, dx and dw against naive full logits and log-softmax (several chunks,
// an all-ignored chunk, ignored rows), and against finite differences; with and without Gemma 2's final soft-capping.
#include <cmath>

#include "backend/backend.h"
#include "backend/grad_check.h"
#include "core/error.h"
#include "catch.h"

using mt::test::approx_equal;
using mt::test::numeric_grad;
using mt::test::random_floats;
using mt::test::rel_err;

namespace {

// Σ CE in fp64 and its gradients scaled by `scale`; softcap > 0 caps the logits to softcap·tanh(z/softcap) first.
double naive_head_loss(std::vector<double>& dx, std::vector<double>& dw, const std::vector<float>& x,
                       const std::vector<float>& w, const std::vector<int32_t>& targets, int64_t H, int64_t V,
                       double scale, double softcap = 0.0) {
  const int64_t T = static_cast<int64_t>(targets.size());
  dx.assign(T * H, 0.0);
  dw.assign(V * H, 0.0);
  double total = 0.0;
  for (int64_t t = 0; t < T; ++t) {
    if (targets[t] == -100) continue;
    std::vector<double> logit(V), dcap(V, 1.0);
    double m = -1e300;
    for (int64_t c = 0; c < V; ++c) {
      for (int64_t h = 0; h < H; ++h) logit[c] += double(x[t * H + h]) * w[c * H + h];
      if (softcap > 0.0) {
        const double th = std::tanh(logit[c] / softcap);
        logit[c] = softcap * th;
        dcap[c] = 1.0 - th * th;
      }
      m = std::max(m, logit[c]);
    }
    double z = 0.0;
    for (double l : logit) z += std::exp(l - m);
    const double lse = m + std::log(z);
    total += lse - logit[targets[t]];
    for (int64_t c = 0; c < V; ++c) {
      const double g = scale * (std::exp(logit[c] - lse) - (c == targets[t] ? 1.0 : 0.0)) * dcap[c];
      for (int64_t h = 0; h < H; ++h) {
        dx[t * H + h] += g * w[c * H + h];
        dw[c * H + h] += g * x[t * H + h];
      }
    }
  }
  return total;
}

}  // namespace

TEST_CASE("head_loss matches naive logits over several chunks", "[backend][head_loss]") {
  auto be = mt::make_cpu_backend();
  const float softcap = GENERATE(0.f, 3.f);  // logits here have std ≈ 2.8: a cap of 3 bends most of them
  CAPTURE(softcap);
  const int64_t T = 300, H = 8, V = 16;  // chunks of 128 rows: [0,128) mixed, [128,256) all ignored, [256,300)
  const float scale = 0.25f;
  auto x = random_floats(T * H, 1), w = random_floats(V * H, 2);
  std::vector<int32_t> targets(T);
  for (int64_t t = 0; t < T; ++t) targets[t] = (t >= 128 && t < 256) || t % 7 == 3 ? -100 : int32_t((t * 5) % V);
  const auto prior_dw = random_floats(V * H, 3);
  std::vector<float> dx(T * H, 9.f), dw = prior_dw;
  const double loss = be->head_loss(dx.data(), dw.data(), x.data(), w.data(), targets.data(), T, H, V, scale,
                                    softcap);
  for (size_t i = 0; i < dw.size(); ++i) dw[i] -= prior_dw[i];
  std::vector<double> want_dx, want_dw;
  const double want = naive_head_loss(want_dx, want_dw, x, w, targets, H, V, scale, softcap);
  CHECK(approx_equal(loss, want, 1e-6));
  CHECK(rel_err(dx, want_dx) < 1e-5);
  CHECK(rel_err(dw, want_dw) < 1e-5);
  for (int64_t i = 128 * H; i < 256 * H; ++i) CHECK(dx[i] == 0.f);
  for (int64_t h = 0; h < H; ++h) CHECK(dx[3 * H + h] == 0.f);
}

TEST_CASE("head_loss gradients match finite differences", "[backend][head_loss]") {
  auto be = mt::make_cpu_backend();
  const int64_t T = 6, H = 8, V = 11;
  const float scale = 0.5f;
  auto x = random_floats(T * H, 4), w = random_floats(V * H, 5);
  const std::vector<int32_t> targets = {3, -100, 0, 10, 7, 3};
  std::vector<float> scratch_dx(T * H), scratch_dw(V * H);
  auto loss = [&] {
    return scale * be->head_loss(scratch_dx.data(), scratch_dw.data(), x.data(), w.data(), targets.data(), T, H, V,
                                 scale, 0.f);
  };
  std::vector<float> dx(T * H), dw(V * H, 0.f);
  be->head_loss(dx.data(), dw.data(), x.data(), w.data(), targets.data(), T, H, V, scale, 0.f);
  CHECK(rel_err(dx, numeric_grad(x, loss, 1e-3f)) < 1e-2);
  CHECK(rel_err(dw, numeric_grad(w, loss, 1e-3f)) < 1e-2);
}

// Finite differences of the fp64 reference (the op's loss is checked against it above): the op runs once.
TEST_CASE("head_loss gradients with a soft-cap match finite differences", "[backend][head_loss]") {
  auto be = mt::make_cpu_backend();
  const int64_t T = 6, H = 8, V = 11;
  const float scale = 0.5f, softcap = 2.5f;
  auto x = random_floats(T * H, 4), w = random_floats(V * H, 5);
  const std::vector<int32_t> targets = {3, -100, 0, 10, 7, 3};
  std::vector<double> scratch_dx, scratch_dw;
  auto loss = [&] { return scale * naive_head_loss(scratch_dx, scratch_dw, x, w, targets, H, V, scale, softcap); };
  std::vector<float> dx(T * H), dw(V * H, 0.f);
  const double got = be->head_loss(dx.data(), dw.data(), x.data(), w.data(), targets.data(), T, H, V, scale, softcap);
  CHECK(approx_equal(got, naive_head_loss(scratch_dx, scratch_dw, x, w, targets, H, V, scale, softcap), 1e-6));
  CHECK(rel_err(dx, numeric_grad(x, loss, 1e-3f)) < 1e-3);
  CHECK(rel_err(dw, numeric_grad(w, loss, 1e-3f)) < 1e-3);
}

TEST_CASE("head_loss with a soft-cap bounds the logits and equals the uncapped loss as the cap grows",
          "[backend][head_loss]") {
  auto be = mt::make_cpu_backend();
  const int64_t T = 5, H = 4, V = 7;
  auto x = random_floats(T * H, 6, 4.f), w = random_floats(V * H, 7, 4.f);  // logits of tens
  const std::vector<int32_t> targets = {0, 6, 3, -100, 2};
  std::vector<float> dx(T * H), dw(V * H, 0.f);
  // A cap of c bounds every capped logit to (−c, c): each row's CE is then below log(V) + 2c.
  const float cap = 0.5f;
  const double capped = be->head_loss(dx.data(), dw.data(), x.data(), w.data(), targets.data(), T, H, V, 1.f, cap);
  CHECK(capped < 4 * (std::log(double(V)) + 2 * cap));
  std::vector<double> want_dx, want_dw;
  CHECK(approx_equal(capped, naive_head_loss(want_dx, want_dw, x, w, targets, H, V, 1.0, cap), 1e-6));
  const double plain = be->head_loss(dx.data(), dw.data(), x.data(), w.data(), targets.data(), T, H, V, 1.f, 0.f);
  const double loose = be->head_loss(dx.data(), dw.data(), x.data(), w.data(), targets.data(), T, H, V, 1.f, 1e5f);
  CHECK(approx_equal(loose, plain, 1e-4));
}

TEST_CASE("head_loss rejects targets outside the vocabulary other than the ignore index", "[backend][head_loss]") {
  auto be = mt::make_cpu_backend();
  std::vector<float> x(4, 1.f), w(8, 1.f), dx(4), dw(8);
  const std::vector<int32_t> bad = {1, 4};
  CHECK_THROWS_AS(be->head_loss(dx.data(), dw.data(), x.data(), w.data(), bad.data(), 2, 2, 4, 1.f, 0.f), mt::Error);
}
