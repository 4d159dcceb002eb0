// CPU backend mixture-of-experts ops: the router's top-k choice and weights against a direct computation, its
// backward (renormalised or not, with the load-balancing term on valid tokens only) against finite differences of
// Σ r·weights + Σ aux·probs, the permutation's stability, gather / combine / grouped GEMM / sigmoid gate backwards
// against finite differences, and an expert without rows.
#include <cmath>
#include <numeric>

#include "backend/backend.h"
#include "backend/grad_check.h"
#include "backend/router_check.h"
#include "catch.h"

using mt::test::approx_equal;
using mt::test::numeric_grad;
using mt::test::project;
using mt::test::random_floats;
using mt::test::rel_err;
using mt::test::router_gradient_error;

namespace {

mt::MoeRouting softmax_router(int64_t E, int64_t k, bool norm) {
  mt::MoeRouting r;
  r.experts = E;
  r.top_k = k;
  r.norm_topk = norm;
  return r;
}

}  // namespace

TEST_CASE("moe router: softmax, top k largest first, renormalised weights", "[backend][moe]") {
  auto be = mt::make_cpu_backend();
  const std::vector<float> logits = {0.f, 2.f, 1.f, -1.f, /* token 2 */ 3.f, 3.f, 0.f, 1.f};
  std::vector<float> probs(8), w(4);
  std::vector<int32_t> idx(4);
  be->moe_route_forward(probs.data(), idx.data(), w.data(), logits.data(), 2, softmax_router(4, 2, false));
  CHECK(idx == std::vector<int32_t>{1, 2, 0, 1});  // a tie goes to the lower expert
  const double z = 1 + std::exp(2.0) + std::exp(1.0) + std::exp(-1.0);
  CHECK(approx_equal(w[0], std::exp(2.0) / z, 1e-6));
  CHECK(approx_equal(w[1], std::exp(1.0) / z, 1e-6));
  be->moe_route_forward(probs.data(), idx.data(), w.data(), logits.data(), 2, softmax_router(4, 2, true));
  CHECK(approx_equal(w[0], std::exp(2.0) / (std::exp(2.0) + std::exp(1.0)), 1e-6));
  CHECK(approx_equal(w[2] + w[3], 1.0, 1e-6));
}

TEST_CASE("moe router backward: routing weights and the load-balancing term, padding masked", "[backend][moe]") {
  auto be = mt::make_cpu_backend();
  const int64_t T = 6, E = 5, k = 2, seq = 3;
  const std::vector<int32_t> lens = {3, 1};  // tokens 4 and 5 are padding
  auto logits = random_floats(T * E, 1, 1.5f);
  const auto r = random_floats(T * k, 2), aux = random_floats(E, 3);
  for (const bool norm : {false, true}) {
    INFO("norm_topk " << norm);
    // The selection held fixed: finite steps must not change it (h is small against the gaps).
    CHECK(router_gradient_error(*be, logits, softmax_router(E, k, norm), T, r, &aux, &lens, seq) < 2e-3);
  }
}

TEST_CASE("moe sigmoid router: groups by their two best biased scores, unbiased weights, scaling; backward",
          "[backend][moe]") {
  auto be = mt::make_cpu_backend();
  // 6 experts in 3 groups of 2, top 2 groups, top 3 experts.
  const std::vector<float> bias = {0.f, 0.f, 0.f, 0.f, 0.9f, 0.9f};
  mt::MoeRouting r;
  r.experts = 6, r.top_k = 3, r.sigmoid = true, r.norm_topk = true, r.scaling = 2.5f, r.groups = 3, r.topk_groups = 2;
  r.score_bias = bias.data();
  const std::vector<float> logits = {2.f, -1.f, 1.f, 0.5f, -3.f, -3.f};
  std::vector<float> p(6), w(3);
  std::vector<int32_t> idx(3);
  be->moe_route_forward(p.data(), idx.data(), w.data(), logits.data(), 1, r);
  // Biased group scores: 0.88 + 0.27 = 1.15, 0.73 + 0.62 = 1.35, 2 · (0.047 + 0.9) = 1.89: groups 2 and 1.
  CHECK(idx == std::vector<int32_t>{4, 5, 2});
  const auto sig = [](double x) { return 1 / (1 + std::exp(-x)); };
  const double total = sig(-3) * 2 + sig(1);
  CHECK(approx_equal(w[2], sig(1) / total * 2.5, 1e-6));
  // Backward against finite differences, the selection held fixed.
  const int64_t T = 5, E = 6;
  auto many = random_floats(T * E, 11);
  const auto rr = random_floats(T * 3, 12);
  CHECK(router_gradient_error(*be, many, r, T, rr) < 2e-3);
}

TEST_CASE("moe router statistics count valid tokens only", "[backend][moe]") {
  auto be = mt::make_cpu_backend();
  const std::vector<float> probs = {0.5f, 0.5f, 0.f, 0.25f, 0.75f, 0.f, 0.1f, 0.1f, 0.8f};
  const std::vector<int32_t> idx = {0, 1, 2};
  const std::vector<int32_t> lens = {2};  // token 2 is padding
  std::vector<int32_t> counts = {1, 0, 0};
  std::vector<float> sums = {0.f, 0.f, 1.f};
  be->moe_router_stats(counts.data(), sums.data(), probs.data(), idx.data(), lens.data(), 3, 3, 3, 1);
  CHECK(counts == std::vector<int32_t>{2, 1, 0});
  CHECK(sums == std::vector<float>{0.75f, 1.25f, 1.f});
}

TEST_CASE("moe permutation is stable by expert, an expert without rows included", "[backend][moe]") {
  auto be = mt::make_cpu_backend();
  const std::vector<int32_t> idx = {2, 0, 0, 2, 3, 0};  // 3 tokens × top 2; expert 1 gets nothing
  std::vector<int32_t> offsets(5), source(6), row_of(6);
  be->moe_permute(offsets.data(), source.data(), row_of.data(), idx.data(), 3, 4, 2);
  CHECK(offsets == std::vector<int32_t>{0, 3, 3, 5, 6});
  CHECK(source == std::vector<int32_t>{1, 2, 5, 0, 3, 4});
  for (int32_t r = 0; r < 6; ++r) CHECK(source[static_cast<size_t>(row_of[static_cast<size_t>(r)])] == r);
}

TEST_CASE("moe gather, combine (from the down projection's data gradient), grouped GEMM, expert bias and sigmoid gate "
          "backwards match finite differences", "[backend][moe]") {
  auto be = mt::make_cpu_backend();
  const int64_t T = 4, k = 2, H = 3, E = 3, I = 5, R = T * k;
  const std::vector<int32_t> idx = {0, 2, 2, 0, 0, 2, 2, 0};  // expert 1 without rows
  std::vector<int32_t> off32(E + 1), source(R), row_of(R);
  be->moe_permute(off32.data(), source.data(), row_of.data(), idx.data(), T, E, k);
  const std::vector<int64_t> offsets(off32.begin(), off32.end());
  auto x = random_floats(T * H, 4), w = random_floats(E * I * H, 5), wts = random_floats(R, 6);
  auto g = random_floats(T, 7), bias = random_floats(E * H, 9);
  const auto r = random_floats(T * H, 8);
  // out = combine(grouped_down(grouped(gather(x))) + b_e) + sigmoid(g)·x: a chain through every op.
  const auto forward = [&] {
    std::vector<float> xs(R * H), h(R * I), back(R * H), out(T * H);
    be->moe_gather(xs.data(), x.data(), source.data(), R, k, H);
    be->grouped_linear_forward(h.data(), xs.data(), w.data(), I * H, offsets.data(), E, H, I);
    be->grouped_linear_forward(back.data(), h.data(), w.data(), I * H, offsets.data(), E, I, H);
    be->grouped_bias_forward(back.data(), bias.data(), H, off32.data(), E, R, H);
    be->moe_combine_forward(out.data(), back.data(), wts.data(), row_of.data(), T, k, H);
    be->row_sigmoid_gate_forward(out.data(), x.data(), g.data(), T, H);
    return project(r, out);
  };
  std::vector<float> xs(R * H), h(R * I);
  be->moe_gather(xs.data(), x.data(), source.data(), R, k, H);
  be->grouped_linear_forward(h.data(), xs.data(), w.data(), I * H, offsets.data(), E, H, I);
  std::vector<float> d_back(R * H), d_wts(R), d_h(R * I), d_xs(R * H), dw(E * I * H, 0.f), dx(T * H), dg(T), dxg(T * H);
  std::vector<float> db(E * H, 0.f), weighted_h = h;
  // The combine's backward without its outputs back: the gathered gradient times w_down, then the weights' share.
  // back = h·w_eᵀ with w_e read as [H, I]: its dw accumulates into the same storage as the first GEMM's.
  be->moe_gather(d_back.data(), r.data(), source.data(), R, k, H);
  be->moe_scale_rows_forward(weighted_h.data(), wts.data(), source.data(), R, I);
  be->grouped_linear_backward(d_h.data(), dw.data(), d_back.data(), weighted_h.data(), w.data(), I * H, offsets.data(),
                              E, I, H, false);
  be->moe_combine_weights_backward(d_h.data(), d_wts.data(), h.data(), wts.data(), source.data(), idx.data(), r.data(),
                                   bias.data(), R, k, I, H);
  be->moe_scale_rows_forward(d_back.data(), wts.data(), source.data(), R, H);
  be->grouped_bias_backward(db.data(), d_back.data(), H, off32.data(), E, R, H);
  be->grouped_linear_backward(d_xs.data(), dw.data(), d_h.data(), xs.data(), w.data(), I * H, offsets.data(), E, H, I,
                              false);
  be->moe_gather_backward(dx.data(), d_xs.data(), row_of.data(), T, k, H, false);
  be->row_sigmoid_gate_backward(dxg.data(), dg.data(), r.data(), x.data(), g.data(), T, H);
  for (int64_t i = 0; i < T * H; ++i) dx[i] += dxg[i];
  CHECK(rel_err(d_wts, numeric_grad(wts, forward, 1e-3f)) < 1e-3);
  CHECK(rel_err(dx, numeric_grad(x, forward, 1e-3f)) < 1e-3);
  CHECK(rel_err(dw, numeric_grad(w, forward, 1e-3f)) < 1e-3);
  CHECK(rel_err(dg, numeric_grad(g, forward, 1e-3f)) < 1e-3);
  CHECK(rel_err(db, numeric_grad(bias, forward, 1e-3f)) < 1e-3);
  for (int64_t i = I * H; i < 2 * I * H; ++i) CHECK(dw[static_cast<size_t>(i)] == 0.f);  // expert 1: no rows, no gradient
}
