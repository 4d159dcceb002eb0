// CPU backend GLU gating: forward against silu(g)·u (SwiGLU) and gelu_tanh(g)·u (GeGLU, torch's
// gelu(approximate="tanh")), backward against finite differences and the closed-form derivative; over one
// [rows, 2·cols] gate_up buffer (leading dimension 2·cols), glu and clamped SwiGLU bitwise the dense ops.
#include <cmath>

#include "backend/backend.h"
#include "backend/grad_check.h"
#include "catch.h"

using mt::Activation;
using mt::test::approx_equal;
using mt::test::numeric_grad;
using mt::test::project;
using mt::test::random_floats;
using mt::test::rel_err;

namespace {

double gelu_tanh(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

double gelu_tanh_grad(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  const double t = std::tanh(k * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

}  // namespace

TEST_CASE("glu silu forward and backward (SwiGLU)", "[backend][glu]") {
  auto be = mt::make_cpu_backend();
  const int64_t n = 48;
  auto g = random_floats(n, 1, 3.f), u = random_floats(n, 2), r = random_floats(n, 3);
  std::vector<float> y(n);
  be->glu_forward(y.data(), g.data(), u.data(), 1, n, n, Activation::silu);
  for (int64_t i = 0; i < n; ++i) {
    const double gd = g[i];
    CHECK(approx_equal(y[i], gd / (1.0 + std::exp(-gd)) * u[i], 1e-6));
  }
  auto loss = [&] {
    std::vector<float> out(n);
    be->glu_forward(out.data(), g.data(), u.data(), 1, n, n, Activation::silu);
    return project(r, out);
  };
  std::vector<float> dg(n, 5.f), du(n, 5.f);
  be->glu_backward(dg.data(), du.data(), nullptr, r.data(), g.data(), u.data(), 1, n, n, Activation::silu);
  CHECK(rel_err(dg, numeric_grad(g, loss, 1e-3f)) < 1e-3);
  CHECK(rel_err(du, numeric_grad(u, loss, 1e-3f)) < 1e-3);
}

TEST_CASE("glu gelu_tanh forward and backward (GeGLU)", "[backend][glu]") {
  auto be = mt::make_cpu_backend();
  const int64_t n = 64;
  auto g = random_floats(n, 4, 3.f), u = random_floats(n, 5), r = random_floats(n, 6);
  g[0] = 0.f, g[1] = -12.f, g[2] = 12.f, g[3] = -0.75f;  // zero, both saturated tails, the negative dip
  std::vector<float> y(n);
  be->glu_forward(y.data(), g.data(), u.data(), 1, n, n, Activation::gelu_tanh);
  for (int64_t i = 0; i < n; ++i) CHECK(approx_equal(y[i], gelu_tanh(g[i]) * u[i], 1e-6));
  CHECK(y[0] == 0.f);
  CHECK(approx_equal(y[2], 12.0 * u[2], 1e-6));

  std::vector<float> dg(n, 5.f), du(n, 5.f);
  be->glu_backward(dg.data(), du.data(), nullptr, r.data(), g.data(), u.data(), 1, n, n, Activation::gelu_tanh);
  for (int64_t i = 0; i < n; ++i) {
    CHECK(approx_equal(dg[i], r[i] * u[i] * gelu_tanh_grad(g[i]), 1e-6));
    CHECK(approx_equal(du[i], r[i] * gelu_tanh(g[i]), 1e-6));
  }
  auto loss = [&] {
    std::vector<float> out(n);
    be->glu_forward(out.data(), g.data(), u.data(), 1, n, n, Activation::gelu_tanh);
    return project(r, out);
  };
  CHECK(rel_err(dg, numeric_grad(g, loss, 1e-3f)) < 1e-3);
  CHECK(rel_err(du, numeric_grad(u, loss, 1e-3f)) < 1e-3);
}

TEST_CASE("glu gelu_tanh is the tanh approximation, not the erf gelu", "[backend][glu]") {
  auto be = mt::make_cpu_backend();
  const std::vector<float> g = {1.f, -1.f, 2.f}, u = {1.f, 1.f, 1.f};
  std::vector<float> y(3);
  be->glu_forward(y.data(), g.data(), u.data(), 1, 3, 3, Activation::gelu_tanh);
  // 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³))) in fp64; the erf gelu gives 0.8413447, −0.1586553, 1.9544997
  CHECK(approx_equal(y[0], 0.841191991, 1e-6));
  CHECK(approx_equal(y[1], -0.158808009, 1e-6));
  CHECK(approx_equal(y[2], 1.954597694, 1e-6));
}

TEST_CASE("glu_backward's activation output is glu_forward's, bit for bit, with the same gradients", "[backend][glu]") {
  auto be = mt::make_cpu_backend();
  const int64_t n = 1000;
  auto g = random_floats(n, 7, 4.f), u = random_floats(n, 8), r = random_floats(n, 9);
  for (const Activation act : {Activation::silu, Activation::gelu_tanh}) {
    std::vector<float> y(n), y_back(n), dg(n), du(n), dg_y(n), du_y(n);
    be->glu_forward(y.data(), g.data(), u.data(), 1, n, n, act);
    be->glu_backward(dg.data(), du.data(), nullptr, r.data(), g.data(), u.data(), 1, n, n, act);
    be->glu_backward(dg_y.data(), du_y.data(), y_back.data(), r.data(), g.data(), u.data(), 1, n, n, act);
    CHECK(y_back == y);
    CHECK(dg_y == dg);
    CHECK(du_y == du);
  }
}

TEST_CASE("glu and clamped SwiGLU over one [rows, 2·cols] gate_up buffer are bitwise the dense ops on its halves",
          "[backend][glu]") {
  auto be = mt::make_cpu_backend();
  const int64_t rows = 37, cols = 24, ld = 2 * cols, n = rows * cols;
  const auto gate_up = random_floats(rows * ld, 10, 3.f), dy = random_floats(n, 11);
  std::vector<float> g(n), u(n);  // the halves, dense
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      g[r * cols + c] = gate_up[r * ld + c];
      u[r * cols + c] = gate_up[r * ld + cols + c];
    }
  // The strided gradients fill [rows, 2·cols] row by row: gate's at column c, up's at cols + c.
  auto check = [&](const std::vector<float>& y, const std::vector<float>& y_dense, const std::vector<float>& d,
                   const std::vector<float>& dg, const std::vector<float>& du) {
    CHECK(y == y_dense);
    bool same = true;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        same = same && d[r * ld + c] == dg[r * cols + c] && d[r * ld + cols + c] == du[r * cols + c];
    CHECK(same);
  };
  for (const Activation act : {Activation::silu, Activation::gelu_tanh}) {
    std::vector<float> y(n), y_dense(n), y_back(n), d(rows * ld), dg(n), du(n);
    be->glu_forward(y.data(), gate_up.data(), gate_up.data() + cols, rows, cols, ld, act);
    be->glu_forward(y_dense.data(), g.data(), u.data(), rows, cols, cols, act);
    be->glu_backward(d.data(), d.data() + cols, y_back.data(), dy.data(), gate_up.data(), gate_up.data() + cols, rows,
                     cols, ld, act);
    be->glu_backward(dg.data(), du.data(), nullptr, dy.data(), g.data(), u.data(), rows, cols, cols, act);
    check(y, y_dense, d, dg, du);
    CHECK(y_back == y);
  }
  const float alpha = 1.702f, limit = 0.7f;
  std::vector<float> y(n), y_dense(n), d(rows * ld), dg(n), du(n);
  be->clamped_swiglu_forward(y.data(), gate_up.data(), gate_up.data() + cols, rows, cols, ld, alpha, limit);
  be->clamped_swiglu_forward(y_dense.data(), g.data(), u.data(), rows, cols, cols, alpha, limit);
  be->clamped_swiglu_backward(d.data(), d.data() + cols, dy.data(), gate_up.data(), gate_up.data() + cols, rows, cols,
                              ld, alpha, limit);
  be->clamped_swiglu_backward(dg.data(), du.data(), dy.data(), g.data(), u.data(), rows, cols, cols, alpha, limit);
  check(y, y_dense, d, dg, du);
}

TEST_CASE("glu over strided rows writes only its columns of dgate and dup", "[backend][glu]") {
  auto be = mt::make_cpu_backend();
  const int64_t rows = 3, cols = 5, ld = 8;  // three columns of each row outside the op
  const auto g = random_floats(rows * ld, 12), u = random_floats(rows * ld, 13), dy = random_floats(rows * cols, 14);
  std::vector<float> y(rows * cols), dg(rows * ld, 7.f), du(rows * ld, 7.f);
  be->glu_forward(y.data(), g.data(), u.data(), rows, cols, ld, Activation::silu);
  be->glu_backward(dg.data(), du.data(), nullptr, dy.data(), g.data(), u.data(), rows, cols, ld, Activation::silu);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < ld; ++c) {
      if (c < cols) {
        const double gd = g[r * ld + c];
        CHECK(approx_equal(y[r * cols + c], gd / (1.0 + std::exp(-gd)) * u[r * ld + c], 1e-6));
        CHECK(dg[r * ld + c] != 7.f);
      } else {
        CHECK(dg[r * ld + c] == 7.f);
        CHECK(du[r * ld + c] == 7.f);
      }
    }
}
