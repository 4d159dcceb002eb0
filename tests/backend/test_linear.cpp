// CPU backend linear op: forward against a naive loop, backward against finite differences and its += / = contract.
#include <omp.h>

#include <tuple>

#include "backend/backend.h"
#include "backend/grad_check.h"
#include "catch.h"

using mt::test::numeric_grad;
using mt::test::project;
using mt::test::approx_equal;
using mt::test::random_floats;
using mt::test::rel_err;

TEST_CASE("linear_forward matches a naive matmul plus bias", "[backend][linear]") {
  auto be = mt::make_cpu_backend();
  const int64_t T = 5, I = 7, O = 3;
  auto x = random_floats(T * I, 1), w = random_floats(O * I, 2), b = random_floats(O, 3);
  std::vector<float> y(T * O), y_nobias(T * O);
  be->linear_forward(y.data(), x.data(), w.data(), b.data(), T, I, O);
  be->linear_forward(y_nobias.data(), x.data(), w.data(), nullptr, T, I, O);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t o = 0; o < O; ++o) {
      double s = 0.0;
      for (int64_t i = 0; i < I; ++i) s += static_cast<double>(x[t * I + i]) * w[o * I + i];
      CHECK(approx_equal(y_nobias[t * O + o], s, 1e-5));
      CHECK(approx_equal(y[t * O + o], s + b[o], 1e-5));
    }
  }
}

TEST_CASE("linear_forward_add is linear_forward plus the residual", "[backend][linear]") {
  auto be = mt::make_cpu_backend();
  const int64_t T = 5, I = 7, O = 3;
  auto x = random_floats(T * I, 1), w = random_floats(O * I, 2), b = random_floats(O, 3), r = random_floats(T * O, 4);
  for (const float* bias : {static_cast<const float*>(b.data()), static_cast<const float*>(nullptr)}) {
    std::vector<float> y(T * O), y_add(T * O);
    be->linear_forward(y.data(), x.data(), w.data(), bias, T, I, O);
    be->add(y.data(), r.data(), T * O);
    be->linear_forward_add(y_add.data(), x.data(), w.data(), bias, r.data(), T, I, O, 1.0f);
    CHECK(y_add == y);
  }
}

TEST_CASE("linear_forward_add's scale multiplies the projection, not the residual (Granite's residual multiplier)",
          "[backend][linear]") {
  auto be = mt::make_cpu_backend();
  const int64_t T = 5, I = 7, O = 3;
  const float m = 0.22f;
  auto x = random_floats(T * I, 1), w = random_floats(O * I, 2), b = random_floats(O, 3), r = random_floats(T * O, 4);
  for (const float* bias : {static_cast<const float*>(b.data()), static_cast<const float*>(nullptr)}) {
    std::vector<float> y(T * O), y_add(T * O);
    be->linear_forward(y.data(), x.data(), w.data(), bias, T, I, O);
    be->linear_forward_add(y_add.data(), x.data(), w.data(), bias, r.data(), T, I, O, m);
    for (int64_t i = 0; i < T * O; ++i) CHECK(approx_equal(y_add[i], r[i] + m * y[i], 1e-6));
  }
}

TEST_CASE("linear_backward's dy_scale gives the gradients of dy_scale·dy in every output", "[backend][linear]") {
  auto be = mt::make_cpu_backend();
  const int64_t T = 6, I = 8, O = 5;
  const float m = 0.22f;
  auto x = random_floats(T * I, 4), w = random_floats(O * I, 5), dy = random_floats(T * O, 7);
  std::vector<float> scaled_dy = dy;
  for (float& v : scaled_dy) v *= m;
  const auto prior_dw = random_floats(O * I, 8), prior_db = random_floats(O, 9), prior_dx = random_floats(T * I, 10);
  for (const bool accumulate : {false, true}) {
    std::vector<float> dx = prior_dx, dw = prior_dw, db = prior_db;
    std::vector<float> dx_ref = prior_dx, dw_ref = prior_dw, db_ref = prior_db;
    be->linear_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), T, I, O, accumulate, m);
    be->linear_backward(dx_ref.data(), dw_ref.data(), db_ref.data(), scaled_dy.data(), x.data(), w.data(), T, I, O,
                        accumulate, 1.0f);
    CHECK(rel_err(dx, dx_ref) < 1e-6);
    CHECK(rel_err(dw, dw_ref) < 1e-6);
    CHECK(rel_err(db, db_ref) < 1e-6);
  }
}

TEST_CASE("linear_backward with dw null gives the full call's dx and leaves x unread", "[backend][linear]") {
  auto be = mt::make_cpu_backend();
  const int64_t T = 6, I = 8, O = 5;
  auto x = random_floats(T * I, 4), w = random_floats(O * I, 5), dy = random_floats(T * O, 7);
  std::vector<float> dx(T * I), dx_only(T * I), dw(O * I, 0.f);
  be->linear_backward(dx.data(), dw.data(), nullptr, dy.data(), x.data(), w.data(), T, I, O, false, 1.0f);
  be->linear_backward(dx_only.data(), nullptr, nullptr, dy.data(), nullptr, w.data(), T, I, O, false, 1.0f);
  CHECK(dx_only == dx);
}

TEST_CASE("linear_backward matches finite differences and accumulates dw and db", "[backend][linear]") {
  auto be = mt::make_cpu_backend();
  const int64_t T = 6, I = 8, O = 5;
  auto x = random_floats(T * I, 4), w = random_floats(O * I, 5), b = random_floats(O, 6), r = random_floats(T * O, 7);
  auto loss = [&] {
    std::vector<float> y(T * O);
    be->linear_forward(y.data(), x.data(), w.data(), b.data(), T, I, O);
    return project(r, y);
  };
  const auto prior_dw = random_floats(O * I, 8), prior_db = random_floats(O, 9);
  std::vector<float> dx(T * I, 99.f), dw = prior_dw, db = prior_db;
  be->linear_backward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), T, I, O, false, 1.0f);
  for (size_t i = 0; i < dw.size(); ++i) dw[i] -= prior_dw[i];
  for (size_t i = 0; i < db.size(); ++i) db[i] -= prior_db[i];
  CHECK(rel_err(dx, numeric_grad(x, loss)) < 1e-3);
  CHECK(rel_err(dw, numeric_grad(w, loss)) < 1e-3);
  CHECK(rel_err(db, numeric_grad(b, loss)) < 1e-3);

  SECTION("accumulate_dx adds to dx; null dx and db are skipped") {
    std::vector<float> dx_acc(T * I, 1.f), dw2(O * I, 0.f);
    be->linear_backward(dx_acc.data(), dw2.data(), nullptr, r.data(), x.data(), w.data(), T, I, O, true, 1.0f);
    for (size_t i = 0; i < dx.size(); ++i) CHECK(approx_equal(dx_acc[i], dx[i] + 1.f, 1e-5));
    std::vector<float> dw3(O * I, 0.f);
    be->linear_backward(nullptr, dw3.data(), nullptr, r.data(), x.data(), w.data(), T, I, O, false, 1.0f);
    CHECK(rel_err(dw3, dw2) < 1e-6);
  }
}

TEST_CASE("linear and the head's loss give the same bits for any OpenMP thread count", "[backend][linear]") {
  // OpenBLAS alone splits some products' inner sums over its threads (dw of a projection to a few heads, dx over a
  // few hundred outputs); data parallelism splits the host's threads over the ranks, so no result may depend on them.
  auto be = mt::make_cpu_backend();
  const int64_t T = 600, I = 256, V = 300;
  for (const int64_t O : {4, 200, 1024}) {
    INFO("O = " << O);
    const auto x = random_floats(T * I, 71), w = random_floats(O * I, 72), dy = random_floats(T * O, 73);
    auto run = [&](int threads) {
      omp_set_num_threads(threads);
      std::vector<float> y(T * O), dx(T * I), dw(O * I);
      be->linear_forward(y.data(), x.data(), w.data(), nullptr, T, I, O);
      be->linear_backward(dx.data(), dw.data(), nullptr, dy.data(), x.data(), w.data(), T, I, O, false, 1.0f);
      return std::vector<std::vector<float>>{y, dx, dw};
    };
    const auto one = run(1);
    CHECK(one == run(2));
    CHECK(one == run(3));
  }
  const auto x = random_floats(T * I, 74), head = random_floats(V * I, 75);
  std::vector<int32_t> targets(T);
  for (int64_t t = 0; t < T; ++t) targets[t] = static_cast<int32_t>((t * 7) % V);
  auto loss = [&](int threads) {
    omp_set_num_threads(threads);
    std::vector<float> dx(T * I), dw(V * I);
    const double l = be->head_loss(dx.data(), dw.data(), x.data(), head.data(), targets.data(), T, I, V, 1.f / T, 0.f);
    return std::make_tuple(l, dx, dw);
  };
  const auto one = loss(1);
  CHECK(one == loss(2));
  CHECK(one == loss(3));
  omp_set_num_threads(omp_get_num_procs());
}
