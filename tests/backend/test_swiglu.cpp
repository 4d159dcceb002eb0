// CPU backend SwiGLU: forward against silu(g)·u, backward against finite differences.
#include <cmath>

#include "backend/backend.h"
#include "backend/grad_check.h"
#include "catch.h"

using mt::test::approx_equal;
using mt::test::numeric_grad;
using mt::test::project;
using mt::test::random_floats;
using mt::test::rel_err;

TEST_CASE("swiglu forward and backward", "[backend][swiglu]") {
  auto be = mt::make_cpu_backend();
  const int64_t n = 48;
  auto g = random_floats(n, 1, 3.f), u = random_floats(n, 2), r = random_floats(n, 3);
  std::vector<float> y(n);
  be->swiglu_forward(y.data(), g.data(), u.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const double gd = g[i];
    CHECK(approx_equal(y[i], gd / (1.0 + std::exp(-gd)) * u[i], 1e-6));
  }
  auto loss = [&] {
    std::vector<float> out(n);
    be->swiglu_forward(out.data(), g.data(), u.data(), n);
    return project(r, out);
  };
  std::vector<float> dg(n, 5.f), du(n, 5.f);
  be->swiglu_backward(dg.data(), du.data(), r.data(), g.data(), u.data(), n);
  CHECK(rel_err(dg, numeric_grad(g, loss, 1e-3f)) < 1e-3);
  CHECK(rel_err(du, numeric_grad(u, loss, 1e-3f)) < 1e-3);
}
