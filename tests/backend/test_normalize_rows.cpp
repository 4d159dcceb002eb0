// CPU backend row normalisation (torch.nn.functional.normalize): forward against x / max(‖x‖, 1e-12), backward
// against finite differences and its += contract, and the clamp branch (zero and tiny rows) against its derivative.
#include <cmath>

#include "backend/backend.h"
#include "backend/grad_check.h"
#include "catch.h"

using mt::test::approx_equal;
using mt::test::numeric_grad;
using mt::test::project;
using mt::test::random_floats;
using mt::test::rel_err;

TEST_CASE("normalize_rows_forward gives unit rows x / ‖x‖", "[backend][normalize_rows]") {
  auto be = mt::make_cpu_backend();
  const int64_t N = 6, D = 13;
  auto x = random_floats(N * D, 1, 3.f);
  std::vector<float> y(N * D, 42.f);
  be->normalize_rows_forward(y.data(), x.data(), N, D);
  for (int64_t n = 0; n < N; ++n) {
    double ss = 0.0, yy = 0.0;
    for (int64_t d = 0; d < D; ++d) ss += static_cast<double>(x[n * D + d]) * x[n * D + d];
    for (int64_t d = 0; d < D; ++d) {
      CHECK(approx_equal(y[n * D + d], x[n * D + d] / std::sqrt(ss), 1e-6));
      yy += static_cast<double>(y[n * D + d]) * y[n * D + d];
    }
    CHECK(approx_equal(yy, 1.0, 1e-6));
  }
}

TEST_CASE("normalize_rows_backward matches finite differences and accumulates", "[backend][normalize_rows]") {
  auto be = mt::make_cpu_backend();
  const int64_t N = 5, D = 9;
  auto x = random_floats(N * D, 2), r = random_floats(N * D, 3);
  auto loss = [&] {
    std::vector<float> y(N * D);
    be->normalize_rows_forward(y.data(), x.data(), N, D);
    return project(r, y);
  };
  const auto prior = random_floats(N * D, 4);
  std::vector<float> dx = prior;
  be->normalize_rows_backward(dx.data(), r.data(), x.data(), N, D);
  for (size_t i = 0; i < dx.size(); ++i) dx[i] -= prior[i];
  CHECK(rel_err(dx, numeric_grad(x, loss, 1e-3f)) < 1e-3);

  SECTION("the gradient is orthogonal to each row: scaling a row leaves y unchanged") {
    for (int64_t n = 0; n < N; ++n) {
      double s = 0.0;
      for (int64_t d = 0; d < D; ++d) s += static_cast<double>(dx[n * D + d]) * x[n * D + d];
      CHECK(std::abs(s) < 1e-5);
    }
  }
}

TEST_CASE("normalize_rows clamps the norm at 1e-12 and differentiates the clamp branch", "[backend][normalize_rows]") {
  auto be = mt::make_cpu_backend();
  const int64_t N = 3, D = 4;
  // row 0 is zero, row 1 has norm 5e-14 (below the clamp), row 2 is ordinary
  std::vector<float> x = {0.f, 0.f, 0.f, 0.f, 3e-14f, 0.f, -4e-14f, 0.f, 1.f, -2.f, 2.f, 4.f};
  std::vector<float> y(N * D);
  be->normalize_rows_forward(y.data(), x.data(), N, D);
  for (int64_t d = 0; d < D; ++d) CHECK(y[d] == 0.f);
  for (int64_t d = 0; d < D; ++d) CHECK(approx_equal(y[D + d], x[D + d] / 1e-12, 1e-6));
  for (int64_t d = 0; d < D; ++d) CHECK(approx_equal(y[2 * D + d], x[2 * D + d] / 5.0, 1e-7));

  const auto dy = random_floats(N * D, 5);
  std::vector<float> dx(N * D, 1.f);
  be->normalize_rows_backward(dx.data(), dy.data(), x.data(), N, D);
  // below the clamp y = x / 1e-12 is linear: dx += dy / 1e-12
  for (int64_t i = 0; i < 2 * D; ++i) CHECK(approx_equal(dx[i], 1.0 + dy[i] / 1e-12, 1e-6));
  // the ordinary row: (dy − y·(y·dy)) / ‖x‖
  double y_dy = 0.0;
  for (int64_t d = 0; d < D; ++d) y_dy += (x[2 * D + d] / 5.0) * dy[2 * D + d];
  for (int64_t d = 0; d < D; ++d) {
    const double want = 1.0 + (dy[2 * D + d] - (x[2 * D + d] / 5.0) * y_dy) / 5.0;
    CHECK(approx_equal(dx[2 * D + d], want, 1e-6));
  }

  SECTION("finite differences inside the clamp branch") {
    std::vector<float> xt = {3e-14f, 1e-14f, -4e-14f, 2e-14f};
    const auto r = random_floats(D, 6);
    auto loss = [&] {
      std::vector<float> yt(D);
      be->normalize_rows_forward(yt.data(), xt.data(), 1, D);
      return project(r, yt);
    };
    std::vector<float> g(D, 0.f);
    be->normalize_rows_backward(g.data(), r.data(), xt.data(), 1, D);
    CHECK(rel_err(g, numeric_grad(xt, loss, 1e-15f)) < 1e-3);
  }
}
