// CPU backend ops GPT-OSS adds: attention sinks (forward against a naive softmax with the sink in the denominator,
// lse including it; dq/dk/dv and the sinks' gradient against finite differences), the router that takes the softmax
// of the top-k logits (with the load-balancing term), the clamped SwiGLU on both sides of its clamps, and
// per-expert biases of grouped rows (one [gate_bias | up_bias] row on the MoE block's gate_up, bitwise the halves).
#include <algorithm>
#include <cmath>
#include <limits>

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

// 2 sequences of 6, 4 query / 2 kv heads of 4, window 3, the second sequence padded to 4.
struct SinkCase {
  std::vector<int32_t> lens = {6, 4};
  std::vector<float> sinks = {0.5f, -1.f, 2.f, 0.f};
  mt::AttnShape shape() const {
    mt::AttnShape s{.batch = 2, .seq = 6, .n_heads = 4, .n_kv_heads = 2, .head_dim = 4, .window = 3};
    s.seq_lens = lens.data();
    s.sinks = sinks.data();
    return s;
  }
};

}  // namespace

TEST_CASE("attention sinks join the softmax denominator and lse", "[backend][attention][sinks]") {
  auto be = mt::make_cpu_backend();
  const SinkCase c;
  const mt::AttnShape s = c.shape();
  const int64_t T = 12, qd = 16, kvd = 8, hd = 4;
  const auto q = random_floats(T * qd, 1), k = random_floats(T * kvd, 2), v = random_floats(T * kvd, 3);
  std::vector<float> out(T * qd), lse(2 * 4 * 6);
  be->attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), s);
  const double scale = 1.0 / std::sqrt(4.0);
  double worst = 0.0;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t i = 0; i < 6; ++i) {
        const int64_t row = (b * 6 + i) * qd + h * hd;
        if (i >= c.lens[b]) {
          for (int64_t d = 0; d < hd; ++d) CHECK(out[row + d] == 0.f);
          continue;
        }
        double z = std::exp(static_cast<double>(c.sinks[h]));
        std::vector<double> o(hd, 0.0);
        for (int64_t j = std::max<int64_t>(0, i - 2); j <= i; ++j) {
          double dot = 0.0;
          for (int64_t d = 0; d < hd; ++d) dot += q[row + d] * k[(b * 6 + j) * kvd + (h / 2) * hd + d];
          const double e = std::exp(dot * scale);
          z += e;
          for (int64_t d = 0; d < hd; ++d) o[d] += e * v[(b * 6 + j) * kvd + (h / 2) * hd + d];
        }
        for (int64_t d = 0; d < hd; ++d) worst = std::max(worst, std::abs(o[d] / z - out[row + d]));
        CHECK(approx_equal(lse[(b * 4 + h) * 6 + i], std::log(z), 1e-5));
      }
  CHECK(worst < 1e-5);
}

TEST_CASE("attention with sinks: backward and the sinks' gradient match finite differences",
          "[backend][attention][sinks]") {
  auto be = mt::make_cpu_backend();
  SinkCase c;
  const int64_t T = 12, qd = 16, kvd = 8;
  auto q = random_floats(T * qd, 4), k = random_floats(T * kvd, 5), v = random_floats(T * kvd, 6);
  const auto r = random_floats(T * qd, 7);
  std::vector<float> out(T * qd), lse(2 * 4 * 6);
  auto loss = [&] {
    be->attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), c.shape());
    return project(r, out);
  };
  loss();
  std::vector<float> dq(T * qd, 7.f), dk(T * kvd, 7.f), dv(T * kvd, 7.f), d_sinks = {0.25f, 0.25f, 0.25f, 0.25f};
  be->attention_backward(dq.data(), dk.data(), dv.data(), r.data(), q.data(), k.data(), v.data(), out.data(),
                         lse.data(), c.shape());
  be->attention_sinks_backward(d_sinks.data(), r.data(), out.data(), lse.data(), c.shape());
  CHECK(rel_err(dq, numeric_grad(q, loss, 1e-3f)) < 1e-2);
  CHECK(rel_err(dk, numeric_grad(k, loss, 1e-3f)) < 1e-2);
  CHECK(rel_err(dv, numeric_grad(v, loss, 1e-3f)) < 1e-2);
  auto numeric = numeric_grad(c.sinks, loss, 1e-3f);
  for (double& g : numeric) g += 0.25;  // attention_sinks_backward accumulates
  CHECK(rel_err(d_sinks, numeric) < 1e-2);
}

TEST_CASE("attention sinks of −inf are plain attention, bitwise", "[backend][attention][sinks]") {
  auto be = mt::make_cpu_backend();
  SinkCase c;
  c.sinks.assign(4, -std::numeric_limits<float>::infinity());
  const auto q = random_floats(12 * 16, 8), k = random_floats(12 * 8, 9), v = random_floats(12 * 8, 10);
  std::vector<float> out(12 * 16), lse(48), plain_out(12 * 16), plain_lse(48);
  be->attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), c.shape());
  mt::AttnShape plain = c.shape();
  plain.sinks = nullptr;
  be->attention_forward(plain_out.data(), plain_lse.data(), q.data(), k.data(), v.data(), plain);
  CHECK(out == plain_out);
  CHECK(lse == plain_lse);
}

TEST_CASE("moe topk_softmax router: top k logits, softmax over them; backward with the load-balancing term",
          "[backend][moe]") {
  auto be = mt::make_cpu_backend();
  mt::MoeRouting router;
  router.experts = 5;
  router.top_k = 2;
  router.topk_softmax = true;
  const std::vector<float> first = {0.f, 2.f, 1.f, -1.f, 0.5f};
  std::vector<float> p(5), w(2);
  std::vector<int32_t> ix(2);
  be->moe_route_forward(p.data(), ix.data(), w.data(), first.data(), 1, router);
  CHECK(ix == std::vector<int32_t>{1, 2});
  CHECK(approx_equal(w[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-6));
  CHECK(approx_equal(p[1], std::exp(2.0) / (1 + std::exp(2.0) + std::exp(1.0) + std::exp(-1.0) + std::exp(0.5)), 1e-6));

  const int64_t T = 6, E = 5, k = 2, seq = 3;
  const std::vector<int32_t> lens = {3, 1};
  auto logits = random_floats(T * E, 11, 1.5f);
  const auto r = random_floats(T * k, 12), aux = random_floats(E, 13);
  CHECK(router_gradient_error(*be, logits, router, T, r, &aux, &lens, seq) < 2e-3);
}

TEST_CASE("clamped SwiGLU: forward, and backward on both sides of the clamps", "[backend][glu]") {
  auto be = mt::make_cpu_backend();
  const float alpha = 1.702f, limit = 0.7f;
  // Values kept 0.05 away from ±limit so that finite steps never cross a clamp.
  auto gate = random_floats(64, 14), up = random_floats(64, 15);
  for (float* v : {gate.data(), up.data()})
    for (int i = 0; i < 64; ++i)
      if (std::abs(std::abs(v[i]) - limit) < 0.05f) v[i] += 0.1f;
  std::vector<float> y(64);
  be->clamped_swiglu_forward(y.data(), gate.data(), up.data(), 8, 8, 8, alpha, limit);
  const float g0 = std::min(gate[0], limit), u0 = std::clamp(up[0], -limit, limit);
  CHECK(approx_equal(y[0], (u0 + 1.0) * g0 / (1.0 + std::exp(-alpha * g0)), 1e-6));
  const auto r = random_floats(64, 16);
  auto loss = [&] {
    be->clamped_swiglu_forward(y.data(), gate.data(), up.data(), 8, 8, 8, alpha, limit);
    return project(r, y);
  };
  std::vector<float> dg(64), du(64);
  be->clamped_swiglu_backward(dg.data(), du.data(), r.data(), gate.data(), up.data(), 8, 8, 8, alpha, limit);
  int clamped_gate = 0, clamped_up = 0;
  for (int i = 0; i < 64; ++i) {
    clamped_gate += gate[i] > limit;
    clamped_up += std::abs(up[i]) > limit;
  }
  CHECK(clamped_gate > 0);
  CHECK(clamped_up > 0);
  CHECK(rel_err(dg, numeric_grad(gate, loss, 1e-3f)) < 1e-3);
  CHECK(rel_err(du, numeric_grad(up, loss, 1e-3f)) < 1e-3);
}

TEST_CASE("grouped bias adds each expert's bias to its rows; backward sums them, an expert without rows untouched",
          "[backend][moe]") {
  auto be = mt::make_cpu_backend();
  const int64_t E = 3, O = 4, stride = 6;  // biases of expert e at e·6 (the rest of the stride is another tensor)
  const std::vector<int32_t> offsets = {0, 2, 2, 5};  // expert 1 has no rows
  const auto b = random_floats(E * stride, 17);
  auto y = random_floats(5 * O, 18);
  const auto y0 = y;
  be->grouped_bias_forward(y.data(), b.data(), stride, offsets.data(), E, 5, O);
  for (int64_t r = 0; r < 5; ++r) {
    const int64_t e = r < 2 ? 0 : 2;
    for (int64_t o = 0; o < O; ++o) CHECK(y[r * O + o] == y0[r * O + o] + b[e * stride + o]);
  }
  const auto dy = random_floats(5 * O, 19);
  std::vector<float> db(E * stride, 1.f);
  be->grouped_bias_backward(db.data(), dy.data(), stride, offsets.data(), E, 5, O);
  for (int64_t o = 0; o < O; ++o) {
    CHECK(approx_equal(db[o], 1.0 + dy[o] + dy[O + o], 1e-6));
    CHECK(db[stride + o] == 1.f);
    CHECK(approx_equal(db[2 * stride + o], 1.0 + dy[2 * O + o] + dy[3 * O + o] + dy[4 * O + o], 1e-6));
  }
  CHECK(db[4] == 1.f);  // outside the bias columns
}

TEST_CASE("grouped bias over gate_up [R, 2I] with [gate_bias | up_bias] rows is bitwise the two biases on the halves",
          "[backend][moe]") {
  auto be = mt::make_cpu_backend();
  const int64_t E = 3, I = 4, R = 6;
  const std::vector<int32_t> offsets = {0, 3, 3, 6};
  const auto b = random_floats(E * 2 * I, 20);  // GPT-OSS's gate_up_proj_bias [E, 2I], de-interleaved
  const auto gate_up0 = random_floats(R * 2 * I, 21), dy = random_floats(R * 2 * I, 22);
  std::vector<float> gate(R * I), up(R * I), d_gate(R * I), d_up(R * I);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < I; ++c) {
      gate[r * I + c] = gate_up0[r * 2 * I + c], up[r * I + c] = gate_up0[r * 2 * I + I + c];
      d_gate[r * I + c] = dy[r * 2 * I + c], d_up[r * I + c] = dy[r * 2 * I + I + c];
    }
  auto gate_up = gate_up0;
  be->grouped_bias_forward(gate_up.data(), b.data(), 2 * I, offsets.data(), E, R, 2 * I);
  be->grouped_bias_forward(gate.data(), b.data(), 2 * I, offsets.data(), E, R, I);
  be->grouped_bias_forward(up.data(), b.data() + I, 2 * I, offsets.data(), E, R, I);
  std::vector<float> db(E * 2 * I, 0.5f), db_halves(E * 2 * I, 0.5f);
  be->grouped_bias_backward(db.data(), dy.data(), 2 * I, offsets.data(), E, R, 2 * I);
  be->grouped_bias_backward(db_halves.data(), d_gate.data(), 2 * I, offsets.data(), E, R, I);
  be->grouped_bias_backward(db_halves.data() + I, d_up.data(), 2 * I, offsets.data(), E, R, I);
  bool same = true;
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < I; ++c)
      same = same && gate_up[r * 2 * I + c] == gate[r * I + c] && gate_up[r * 2 * I + I + c] == up[r * I + c];
  CHECK(same);
  CHECK(db == db_halves);
}
