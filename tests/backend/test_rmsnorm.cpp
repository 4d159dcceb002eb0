// CPU backend RMSNorm: forward against the HF LlamaRMSNorm formula and Gemma's (1 + w) weight offset, backward
// against finite differences.
#include <cmath>

#include "backend/backend.h"
#include "backend/grad_check.h"
#include "catch.h"

using mt::test::numeric_grad;
using mt::test::project;
using mt::test::approx_equal;
using mt::test::random_floats;
using mt::test::rel_err;

TEST_CASE("rmsnorm_forward matches the LlamaRMSNorm formula", "[backend][rmsnorm]") {
  auto be = mt::make_cpu_backend();
  const int64_t N = 4, D = 9;
  const float eps = 1e-5f;
  auto x = random_floats(N * D, 1, 3.f), w = random_floats(D, 2);
  std::vector<float> y(N * D);
  be->rmsnorm_forward(y.data(), x.data(), w.data(), N, D, eps, 0.f);
  for (int64_t n = 0; n < N; ++n) {
    double ss = 0.0;
    for (int64_t d = 0; d < D; ++d) ss += static_cast<double>(x[n * D + d]) * x[n * D + d];
    const double rstd = 1.0 / std::sqrt(ss / D + eps);
    for (int64_t d = 0; d < D; ++d) CHECK(approx_equal(y[n * D + d], x[n * D + d] * rstd * w[d], 1e-6));
  }
}

TEST_CASE("rmsnorm_backward matches finite differences and dw accumulates", "[backend][rmsnorm]") {
  auto be = mt::make_cpu_backend();
  const int64_t N = 6, D = 8;
  const float eps = 1e-6f;
  auto x = random_floats(N * D, 3), w = random_floats(D, 4), r = random_floats(N * D, 5);
  auto loss = [&] {
    std::vector<float> y(N * D);
    be->rmsnorm_forward(y.data(), x.data(), w.data(), N, D, eps, 0.f);
    return project(r, y);
  };
  std::vector<float> dx(N * D, 7.f), dw(D, 2.f);
  be->rmsnorm_backward(dx.data(), dw.data(), r.data(), x.data(), w.data(), N, D, eps, 0.f);
  for (float& g : dw) g -= 2.f;
  CHECK(rel_err(dx, numeric_grad(x, loss, 1e-3f)) < 1e-2);
  CHECK(rel_err(dw, numeric_grad(w, loss, 1e-3f)) < 1e-2);
}

TEST_CASE("rmsnorm_backward_add is rmsnorm_backward plus the residual, dw alike", "[backend][rmsnorm]") {
  auto be = mt::make_cpu_backend();
  const int64_t N = 6, D = 8;
  const float eps = 1e-6f;
  auto x = random_floats(N * D, 3), w = random_floats(D, 4), dy = random_floats(N * D, 5), r = random_floats(N * D, 6);
  for (const float offset : {0.f, 1.f}) {
    std::vector<float> dx(N * D), dw(D, 2.f), dx_add(N * D), dw_add(D, 2.f);
    be->rmsnorm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), N, D, eps, offset);
    be->add(dx.data(), r.data(), N * D);
    be->rmsnorm_backward_add(dx_add.data(), dw_add.data(), dy.data(), x.data(), w.data(), r.data(), N, D, eps, offset);
    CHECK(dx_add == dx);
    CHECK(dw_add == dw);
  }
}

TEST_CASE("rmsnorm with weight offset 1 is Gemma's (1 + w)·x̂", "[backend][rmsnorm]") {
  auto be = mt::make_cpu_backend();
  const int64_t N = 5, D = 11;
  const float eps = 1e-6f;
  auto x = random_floats(N * D, 6, 2.f), w = random_floats(D, 7, 0.3f);
  std::vector<float> y(N * D);
  be->rmsnorm_forward(y.data(), x.data(), w.data(), N, D, eps, 1.f);
  for (int64_t n = 0; n < N; ++n) {
    double ss = 0.0;
    for (int64_t d = 0; d < D; ++d) ss += static_cast<double>(x[n * D + d]) * x[n * D + d];
    const double rstd = 1.0 / std::sqrt(ss / D + eps);
    for (int64_t d = 0; d < D; ++d) {
      CHECK(approx_equal(y[n * D + d], x[n * D + d] * rstd * (1.0 + w[d]), 1e-6));
    }
  }
  // The offset is added in fp32 before the product: bitwise the offset-0 op on the weights w + 1.
  std::vector<float> w1(D), y1(N * D), dx(N * D), dx1(N * D), dw(D, 0.f), dw1(D, 0.f);
  for (int64_t d = 0; d < D; ++d) w1[d] = w[d] + 1.f;
  be->rmsnorm_forward(y1.data(), x.data(), w1.data(), N, D, eps, 0.f);
  CHECK(y == y1);
  const auto dy = random_floats(N * D, 8);
  be->rmsnorm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), N, D, eps, 1.f);
  be->rmsnorm_backward(dx1.data(), dw1.data(), dy.data(), x.data(), w1.data(), N, D, eps, 0.f);
  CHECK(dx == dx1);
  CHECK(dw == dw1);
}

TEST_CASE("rmsnorm_backward with weight offset 1 matches finite differences", "[backend][rmsnorm]") {
  auto be = mt::make_cpu_backend();
  const int64_t N = 4, D = 7;
  const float eps = 1e-6f;
  auto x = random_floats(N * D, 9), w = random_floats(D, 10, 0.5f), r = random_floats(N * D, 11);
  auto loss = [&] {
    std::vector<float> y(N * D);
    be->rmsnorm_forward(y.data(), x.data(), w.data(), N, D, eps, 1.f);
    return project(r, y);
  };
  std::vector<float> dx(N * D, 7.f), dw(D, -3.f);
  be->rmsnorm_backward(dx.data(), dw.data(), r.data(), x.data(), w.data(), N, D, eps, 1.f);
  for (float& g : dw) g += 3.f;
  CHECK(rel_err(dx, numeric_grad(x, loss, 1e-3f)) < 1e-2);
  CHECK(rel_err(dw, numeric_grad(w, loss, 1e-3f)) < 1e-2);
}
