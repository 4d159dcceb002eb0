// CPU backend ops of Llama 4: the weightless q/k RMS norm (forward against its formula, backward against finite
// differences), the attention temperature (its factors at the floor boundaries, and its own transpose), and the
// expert-input scaling of the routed rows (forward, the routing weights' and the rows' gradients by finite
// differences).
#include <cmath>
#include <numeric>

#include "backend/backend.h"
#include "backend/grad_check.h"
#include "catch.h"

using mt::test::approx_equal;
using mt::test::numeric_grad;
using mt::test::project;
using mt::test::random_floats;
using mt::test::rel_err;

TEST_CASE("rms_normalize: y = x·rsqrt(mean(x²) + eps), backward by finite differences", "[backend][llama4]") {
  auto be = mt::make_cpu_backend();
  const int64_t N = 5, D = 8;
  const float eps = 1e-5f;
  auto x = random_floats(N * D, 1, 2.f), r = random_floats(N * D, 2);
  std::vector<float> y(N * D);
  be->rms_normalize_forward(y.data(), x.data(), N, D, eps);
  for (int64_t n = 0; n < N; ++n) {
    double ss = 0.0;
    for (int64_t d = 0; d < D; ++d) ss += static_cast<double>(x[n * D + d]) * x[n * D + d];
    for (int64_t d = 0; d < D; ++d)
      CHECK(approx_equal(y[n * D + d], x[n * D + d] / std::sqrt(ss / D + eps), 1e-6));
  }
  auto loss = [&] {
    std::vector<float> out(N * D);
    be->rms_normalize_forward(out.data(), x.data(), N, D, eps);
    return project(r, out);
  };
  std::vector<float> dx(N * D, 42.f);  // "=": overwritten
  be->rms_normalize_backward(dx.data(), r.data(), x.data(), N, D, eps);
  CHECK(rel_err(dx, numeric_grad(x, loss, 1e-3f)) < 1e-3);
}

TEST_CASE("attention_temperature: rows × log1p(floor((p + 1) / floor_scale))·attn_scale + 1, p the index in the row",
          "[backend][llama4]") {
  auto be = mt::make_cpu_backend();
  const int64_t seq = 9, width = 3, T = 2 * seq;
  std::vector<float> x(T * width, 1.f);
  be->attention_temperature(x.data(), T, seq, width, 4.f, 0.5f);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t p = t % seq;
    const double expect = std::log1p(static_cast<double>((p + 1) / 4)) * 0.5 + 1.0;
    INFO("token " << t);
    CHECK(approx_equal(x[t * width + 2], expect, 1e-6));
  }
  CHECK(x[0] == 1.f);                  // p + 1 = 1 < 4: factor 1
  CHECK(x[3 * width] > 1.f);           // p + 1 = 4: the first floor
  CHECK(x[(seq + 2) * width] == 1.f);  // the second row starts again at p = 0
  // The map is diagonal: applied to dy it is its own transpose (Σ r·f(x) = Σ f(r)·x).
  auto a = random_floats(T * width, 3), b = random_floats(T * width, 4);
  std::vector<float> fa = a, fb = b;
  be->attention_temperature(fa.data(), T, seq, width, 4.f, 0.5f);
  be->attention_temperature(fb.data(), T, seq, width, 4.f, 0.5f);
  CHECK(approx_equal(project(b, fa), project(fb, a), 1e-6));
}

TEST_CASE("moe_scale_rows: routed rows × their weights, the backward giving the weights' and the rows' gradients",
          "[backend][llama4]") {
  auto be = mt::make_cpu_backend();
  const int64_t T = 5, k = 2, H = 4, R = T * k;
  const std::vector<int32_t> source = {3, 0, 7, 9, 1, 2, 8, 4, 6, 5};  // grouped row r holds routed row source[r]
  auto x = random_floats(T * H, 5), w = random_floats(R, 6), r = random_floats(R * H, 7);
  // f(x, w) = Σ_r r[r]·(w[source[r]]·x[source[r] / k]): gather, then scale.
  auto loss = [&] {
    std::vector<float> xs(R * H);
    for (int64_t g = 0; g < R; ++g)
      std::copy_n(x.begin() + source[static_cast<size_t>(g)] / k * H, H, xs.begin() + g * H);
    be->moe_scale_rows_forward(xs.data(), w.data(), source.data(), R, H);
    return project(r, xs);
  };
  std::vector<float> dxs = r, dw(R, 42.f);
  be->moe_scale_rows_backward(dxs.data(), dw.data(), x.data(), w.data(), source.data(), R, k, H);
  CHECK(rel_err(dw, numeric_grad(w, loss, 1e-3f)) < 1e-4);
  // The rows' gradient: dxs (now w·r) summed back to tokens as the gather's backward does.
  std::vector<float> dx(T * H, 0.f);
  for (int64_t g = 0; g < R; ++g)
    for (int64_t h = 0; h < H; ++h) dx[source[static_cast<size_t>(g)] / k * H + h] += dxs[g * H + h];
  CHECK(rel_err(dx, numeric_grad(x, loss, 1e-3f)) < 1e-4);
}
