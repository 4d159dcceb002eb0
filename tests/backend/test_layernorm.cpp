// CPU backend LayerNorm: forward against nn.LayerNorm's formula (with and without bias, one weight row or one per
// head), backward against finite differences, the residual added in the backward's pass (also into dx itself), and
// the non-gated activation (glu with no up) as the gated one with up = 1.
#include <cmath>

#include "backend/backend.h"
#include "backend/grad_check.h"
#include "catch.h"

using mt::test::approx_equal;
using mt::test::numeric_grad;
using mt::test::project;
using mt::test::random_floats;
using mt::test::rel_err;

TEST_CASE("layernorm_forward matches nn.LayerNorm's formula per weight row", "[backend][layernorm]") {
  auto be = mt::make_cpu_backend();
  const int64_t N = 6, D = 9, G = 3;
  const float eps = 1e-5f;
  auto x = random_floats(N * D, 1, 3.f), w = random_floats(G * D, 2), b = random_floats(G * D, 3);
  for (const bool bias : {false, true}) {
    std::vector<float> y(N * D);
    be->layernorm_forward(y.data(), x.data(), w.data(), bias ? b.data() : nullptr, N, D, G, eps);
    for (int64_t n = 0; n < N; ++n) {
      double mean = 0.0, var = 0.0;
      for (int64_t d = 0; d < D; ++d) mean += x[n * D + d];
      mean /= D;
      for (int64_t d = 0; d < D; ++d) var += (x[n * D + d] - mean) * (x[n * D + d] - mean);
      const double rstd = 1.0 / std::sqrt(var / D + eps);
      const int64_t g = n % G;
      for (int64_t d = 0; d < D; ++d) {
        const double ref = (x[n * D + d] - mean) * rstd * w[g * D + d] + (bias ? b[g * D + d] : 0.0);
        CHECK(approx_equal(y[n * D + d], ref, 1e-5));
      }
    }
  }
}

TEST_CASE("layernorm_backward matches finite differences; dw, db accumulate", "[backend][layernorm]") {
  auto be = mt::make_cpu_backend();
  const int64_t N = 8, D = 8;
  const float eps = 1e-6f;
  for (const int64_t G : {1, 4}) {
    INFO("weight rows " << G);
    auto x = random_floats(N * D, 3), w = random_floats(G * D, 4), b = random_floats(G * D, 6);
    auto r = random_floats(N * D, 5);
    auto loss = [&] {
      std::vector<float> y(N * D);
      be->layernorm_forward(y.data(), x.data(), w.data(), b.data(), N, D, G, eps);
      return project(r, y);
    };
    std::vector<float> dx(N * D, 7.f), dw(G * D, 2.f), db(G * D, 1.f);
    be->layernorm_backward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), nullptr, N, D, G, eps);
    for (float& g : dw) g -= 2.f;
    for (float& g : db) g -= 1.f;
    CHECK(rel_err(dx, numeric_grad(x, loss, 1e-3f)) < 1e-2);
    CHECK(rel_err(dw, numeric_grad(w, loss, 1e-3f)) < 1e-2);
    CHECK(rel_err(db, numeric_grad(b, loss, 1e-3f)) < 1e-2);
  }
}

TEST_CASE("norm backwards add the residual in their pass, also into dx itself", "[backend][layernorm]") {
  auto be = mt::make_cpu_backend();
  const int64_t N = 6, D = 8;
  const float eps = 1e-6f;
  auto x = random_floats(N * D, 3), w = random_floats(D, 4), dy = random_floats(N * D, 5), r = random_floats(N * D, 6);
  std::vector<float> dx(N * D), dw(D, 0.f), dx_add(N * D), dw_add(D, 0.f), in_place = r, dw_in_place(D, 0.f);
  be->layernorm_backward(dx.data(), dw.data(), nullptr, dy.data(), x.data(), w.data(), nullptr, N, D, 1, eps);
  be->add(dx.data(), r.data(), N * D);
  be->layernorm_backward(dx_add.data(), dw_add.data(), nullptr, dy.data(), x.data(), w.data(), r.data(), N, D, 1, eps);
  be->layernorm_backward(in_place.data(), dw_in_place.data(), nullptr, dy.data(), x.data(), w.data(), in_place.data(),
                         N, D, 1, eps);
  CHECK(dx_add == dx);
  CHECK(in_place == dx);
  CHECK(dw_add == dw);
  std::vector<float> rms(N * D), rms_in_place = r, dw_rms(D, 0.f);
  be->rmsnorm_backward_add(rms.data(), dw_rms.data(), dy.data(), x.data(), w.data(), r.data(), N, D, eps, 0.f);
  be->rmsnorm_backward_add(rms_in_place.data(), dw_rms.data(), dy.data(), x.data(), w.data(), rms_in_place.data(), N,
                           D, eps, 0.f);
  CHECK(rms_in_place == rms);
}

TEST_CASE("glu without up is the activation alone, bitwise the gated op with up = 1", "[backend][glu]") {
  auto be = mt::make_cpu_backend();
  const int64_t n = 257;
  auto g = random_floats(n, 8, 2.f), dy = random_floats(n, 9);
  const std::vector<float> ones(n, 1.f);
  for (const mt::Activation act : {mt::Activation::silu, mt::Activation::gelu_tanh}) {
    std::vector<float> y(n), y1(n), dg(n), dg1(n), du1(n), yb(n), yb1(n);
    be->glu_forward(y.data(), g.data(), nullptr, 1, n, n, act);
    be->glu_forward(y1.data(), g.data(), ones.data(), 1, n, n, act);
    be->glu_backward(dg.data(), nullptr, yb.data(), dy.data(), g.data(), nullptr, 1, n, n, act);
    be->glu_backward(dg1.data(), du1.data(), yb1.data(), dy.data(), g.data(), ones.data(), 1, n, n, act);
    CHECK(y == y1);
    CHECK(dg == dg1);
    CHECK(yb == y);
  }
}
