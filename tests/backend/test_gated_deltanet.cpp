// CPU backend Gated DeltaNet ops and the gated-attention output gate: forwards against direct formulas, backwards
// against finite differences, the chunked (WY) delta rule against the recurrent one, and the state restarting at
// every sequence and packed segment (packing leaks nothing, padding changes nothing).
#include <cmath>

#include <omp.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/grad_check.h"
#include "catch.h"

using mt::DeltaRuleShape;
using mt::test::approx_equal;
using mt::test::numeric_grad;
using mt::test::project;
using mt::test::random_floats;
using mt::test::rel_err;

namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

DeltaRuleShape rule_shape(int64_t batch, int64_t seq, int64_t nk, int64_t nv, int64_t dk, int64_t dv) {
  DeltaRuleShape s;
  s.batch = batch;
  s.seq = seq;
  s.n_k_heads = nk;
  s.n_v_heads = nv;
  s.k_head_dim = dk;
  s.v_head_dim = dv;
  return s;
}

// g < 0 as the model's −exp(A_log)·softplus(·) gives, beta in (0, 1).
std::vector<float> decays(int64_t n, uint32_t seed) {
  auto g = random_floats(n, seed);
  for (float& x : g) x = -0.05f - 0.5f * std::abs(x);
  return g;
}
std::vector<float> betas(int64_t n, uint32_t seed) {
  auto b = random_floats(n, seed);
  for (float& x : b) x = static_cast<float>(sigmoid(x));
  return b;
}

}  // namespace

TEST_CASE("sigmoid output gate forward and backward", "[backend][deltanet]") {
  auto be = mt::make_cpu_backend();
  const int64_t n = 40;
  auto x = random_floats(n, 1), gate = random_floats(n, 2, 2.f), r = random_floats(n, 3);
  std::vector<float> y(n);
  be->sigmoid_gate_forward(y.data(), x.data(), gate.data(), n);
  for (int64_t i = 0; i < n; ++i) CHECK(approx_equal(y[i], x[i] * sigmoid(gate[i]), 1e-6));
  auto loss = [&] {
    std::vector<float> out(n);
    be->sigmoid_gate_forward(out.data(), x.data(), gate.data(), n);
    return project(r, out);
  };
  std::vector<float> dx = r, dgate(n);  // dx aliases dy
  be->sigmoid_gate_backward(dx.data(), dgate.data(), dx.data(), x.data(), gate.data(), n);
  CHECK(rel_err(dx, numeric_grad(x, loss, 1e-3f)) < 1e-3);
  CHECK(rel_err(dgate, numeric_grad(gate, loss, 1e-3f)) < 1e-3);
}

TEST_CASE("gated rmsnorm forward and backward (w·x̂·silu(z))", "[backend][deltanet]") {
  auto be = mt::make_cpu_backend();
  const int64_t N = 5, D = 8;
  const float eps = 1e-6f;
  auto x = random_floats(N * D, 4), z = random_floats(N * D, 5, 2.f), w = random_floats(D, 6),
       r = random_floats(N * D, 7);
  std::vector<float> y(N * D);
  be->gated_rmsnorm_forward(y.data(), x.data(), z.data(), w.data(), N, D, eps);
  for (int64_t n = 0; n < N; ++n) {
    double ss = 0;
    for (int64_t d = 0; d < D; ++d) ss += double(x[n * D + d]) * x[n * D + d];
    const double rstd = 1.0 / std::sqrt(ss / D + eps);
    for (int64_t d = 0; d < D; ++d) {
      const double zz = z[n * D + d];
      CHECK(approx_equal(y[n * D + d], w[d] * x[n * D + d] * rstd * zz * sigmoid(zz), 1e-5));
    }
  }
  auto loss = [&] {
    std::vector<float> out(N * D);
    be->gated_rmsnorm_forward(out.data(), x.data(), z.data(), w.data(), N, D, eps);
    return project(r, out);
  };
  std::vector<float> dx(N * D), dz(N * D), dw(D, 0.5f);
  be->gated_rmsnorm_backward(dx.data(), dz.data(), dw.data(), r.data(), x.data(), z.data(), w.data(), N, D, eps);
  for (float& v : dw) v -= 0.5f;  // dw accumulates
  CHECK(rel_err(dx, numeric_grad(x, loss, 1e-3f)) < 2e-3);
  CHECK(rel_err(dz, numeric_grad(z, loss, 1e-3f)) < 2e-3);
  CHECK(rel_err(dw, numeric_grad(w, loss, 1e-3f)) < 2e-3);
}

TEST_CASE("causal conv1d + silu: taps stop at sequence and segment starts; backward", "[backend][deltanet]") {
  auto be = mt::make_cpu_backend();
  const int64_t batch = 2, seq = 6, C = 3, K = 4, T = batch * seq;
  auto x = random_floats(T * C, 8), w = random_floats(C * K, 9), r = random_floats(T * C, 10);
  const std::vector<int32_t> segments = {0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 3};
  std::vector<float> y(T * C);
  be->causal_conv1d_forward(y.data(), x.data(), w.data(), batch, seq, C, K, segments.data());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < C; ++c) {
      double a = 0;
      for (int64_t j = 0; j < K; ++j) {
        const int64_t src = t - K + 1 + j;
        if (src >= t / seq * seq && segments[src] == segments[t]) a += double(w[c * K + j]) * x[src * C + c];
      }
      CHECK(approx_equal(y[t * C + c], a * sigmoid(a), 1e-5));
    }
  auto loss = [&] {
    std::vector<float> out(T * C);
    be->causal_conv1d_forward(out.data(), x.data(), w.data(), batch, seq, C, K, segments.data());
    return project(r, out);
  };
  std::vector<float> dx(T * C), dw(C * K, 0.f);
  be->causal_conv1d_backward(dx.data(), dw.data(), r.data(), x.data(), w.data(), batch, seq, C, K, segments.data());
  CHECK(rel_err(dx, numeric_grad(x, loss, 1e-3f)) < 1e-3);
  CHECK(rel_err(dw, numeric_grad(w, loss, 1e-3f)) < 1e-3);
}

TEST_CASE("deltanet gates: beta = sigmoid(b), g = -exp(A_log)·softplus(a + dt_bias); backward", "[backend][deltanet]") {
  auto be = mt::make_cpu_backend();
  const int64_t T = 4, n = 3;
  auto ba = random_floats(T * 2 * n, 11, 2.f), a_log = random_floats(n, 12), dt = random_floats(n, 13);
  ba[n] = 25.f;  // softplus's linear branch
  auto rg = random_floats(T * n, 14), rb = random_floats(T * n, 15);
  std::vector<float> g(T * n), beta(T * n);
  be->deltanet_gates_forward(g.data(), beta.data(), ba.data(), a_log.data(), dt.data(), T, n);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < n; ++h) {
      const double x = double(ba[t * 2 * n + n + h]) + dt[h];
      CHECK(approx_equal(beta[t * n + h], sigmoid(ba[t * 2 * n + h]), 1e-6));
      CHECK(approx_equal(g[t * n + h], -std::exp(double(a_log[h])) * (x > 20 ? x : std::log1p(std::exp(x))), 1e-5));
    }
  auto loss = [&] {
    std::vector<float> g2(T * n), b2(T * n);
    be->deltanet_gates_forward(g2.data(), b2.data(), ba.data(), a_log.data(), dt.data(), T, n);
    return project(rg, g2) + project(rb, b2);
  };
  std::vector<float> dba(T * 2 * n), da(n, 0.f), ddt(n, 0.f);
  be->deltanet_gates_backward(dba.data(), da.data(), ddt.data(), rg.data(), rb.data(), ba.data(), a_log.data(),
                              dt.data(), T, n);
  CHECK(rel_err(dba, numeric_grad(ba, loss, 1e-3f)) < 1e-3);
  CHECK(rel_err(da, numeric_grad(a_log, loss, 1e-3f)) < 1e-3);
  CHECK(rel_err(ddt, numeric_grad(dt, loss, 1e-3f)) < 1e-3);
}

TEST_CASE("gated delta rule backward matches finite differences (GQA, padding, segments)", "[backend][deltanet]") {
  auto be = mt::make_cpu_backend();
  DeltaRuleShape s = rule_shape(2, 7, 1, 2, 4, 3);
  const std::vector<int32_t> lens = {7, 5};
  const std::vector<int32_t> segments = {0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3};
  s.seq_lens = lens.data();
  s.segments = segments.data();
  const int64_t T = s.batch * s.seq, nv = s.n_v_heads;
  auto qkv = random_floats(T * s.row(), 16), g = decays(T * nv, 17), beta = betas(T * nv, 18),
       r = random_floats(T * s.value_dim(), 19);
  auto loss = [&] {
    std::vector<float> o(T * s.value_dim());
    be->gated_delta_rule_forward(o.data(), qkv.data(), g.data(), beta.data(), s);
    return project(r, o);
  };
  std::vector<float> o(T * s.value_dim());
  be->gated_delta_rule_forward(o.data(), qkv.data(), g.data(), beta.data(), s);
  for (int64_t t = 5; t < 7; ++t)  // padding of sequence 1
    for (int64_t j = 0; j < s.value_dim(); ++j) CHECK(o[(7 + t) * s.value_dim() + j] == 0.f);
  std::vector<float> dqkv(T * s.row()), dg(T * nv), dbeta(T * nv);
  be->gated_delta_rule_backward(dqkv.data(), dg.data(), dbeta.data(), r.data(), qkv.data(), g.data(), beta.data(), s);
  CHECK(rel_err(dqkv, numeric_grad(qkv, loss, 1e-3f)) < 2e-3);
  CHECK(rel_err(dg, numeric_grad(g, loss, 1e-3f)) < 2e-3);
  CHECK(rel_err(dbeta, numeric_grad(beta, loss, 1e-3f)) < 2e-3);
}

TEST_CASE("gated delta rule: a packed example and a padded sequence give what they give alone", "[backend][deltanet]") {
  auto be = mt::make_cpu_backend();
  // Sequence 0 packs examples of 5 and 4 tokens; sequence 1 holds the second example alone, padded to 9.
  DeltaRuleShape packed = rule_shape(2, 9, 2, 4, 4, 4);
  const std::vector<int32_t> lens = {9, 4};
  const std::vector<int32_t> segments = {0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 3};
  packed.seq_lens = lens.data();
  packed.segments = segments.data();
  const int64_t R = packed.row(), V = packed.value_dim(), nv = packed.n_v_heads, T = 18;
  auto qkv = random_floats(T * R, 20), g = decays(T * nv, 21), beta = betas(T * nv, 22);
  for (int64_t t = 0; t < 4; ++t) {  // sequence 1's tokens = the packed second example; its padding is noise
    std::copy_n(qkv.begin() + (5 + t) * R, R, qkv.begin() + (9 + t) * R);
    std::copy_n(g.begin() + (5 + t) * nv, nv, g.begin() + (9 + t) * nv);
    std::copy_n(beta.begin() + (5 + t) * nv, nv, beta.begin() + (9 + t) * nv);
  }
  std::vector<float> o(T * V);
  be->gated_delta_rule_forward(o.data(), qkv.data(), g.data(), beta.data(), packed);
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t j = 0; j < V; ++j) CHECK(o[(5 + t) * V + j] == o[(9 + t) * V + j]);
}

TEST_CASE("chunked (WY) delta rule equals the recurrent one, forward and backward", "[backend][deltanet]") {
  auto be = mt::make_cpu_backend();
  struct Case {
    int64_t seq, nk, nv, dk, dv, chunk;
  };
  // Lengths of several chunks, not multiples of the chunk; chunk 64 over two and a half chunks; segments inside
  // chunks, starting a chunk, and a chunk of padding only.
  for (const Case c : {Case{13, 1, 1, 4, 4, 4}, Case{21, 2, 4, 8, 6, 5}, Case{150, 1, 2, 16, 8, 64},
                       Case{130, 2, 2, 8, 8, 64}}) {
    INFO("seq " << c.seq << " chunk " << c.chunk);
    DeltaRuleShape s = rule_shape(2, c.seq, c.nk, c.nv, c.dk, c.dv);
    const std::vector<int32_t> lens = {static_cast<int32_t>(c.seq), static_cast<int32_t>(c.seq == 130 ? 40 : c.seq - 3)};
    std::vector<int32_t> segments(static_cast<size_t>(2 * c.seq));
    for (int64_t t = 0; t < 2 * c.seq; ++t)
      segments[t] = static_cast<int32_t>(t < c.seq ? (c.seq == 130 ? (t < 64 ? 0 : t < 100 ? 1 : 2) : t * 3 / c.seq) : 7);
    s.seq_lens = lens.data();
    s.segments = segments.data();
    const int64_t T = 2 * c.seq, nv = c.nv;
    auto qkv = random_floats(T * s.row(), 23), g = decays(T * c.nv, 24), beta = betas(T * c.nv, 25),
         d_o = random_floats(T * s.value_dim(), 26);
    std::vector<float> recurrent(T * s.value_dim()), chunked(T * s.value_dim());
    be->gated_delta_rule_forward(recurrent.data(), qkv.data(), g.data(), beta.data(), s);
    mt::cpu::gated_delta_rule_chunked_forward(chunked.data(), qkv.data(), g.data(), beta.data(), s, c.chunk);
    CHECK(rel_err(chunked, recurrent) < 1e-5);
    std::vector<float> dqkv(T * s.row()), dg(T * nv), dbeta(T * nv), dqkv_c(T * s.row()), dg_c(T * nv),
        dbeta_c(T * nv);
    be->gated_delta_rule_backward(dqkv.data(), dg.data(), dbeta.data(), d_o.data(), qkv.data(), g.data(), beta.data(),
                                  s);
    mt::cpu::gated_delta_rule_chunked_backward(dqkv_c.data(), dg_c.data(), dbeta_c.data(), d_o.data(), qkv.data(),
                                               g.data(), beta.data(), s, c.chunk);
    CHECK(rel_err(dqkv_c, dqkv) < 1e-5);
    CHECK(rel_err(dg_c, dg) < 1e-5);
    CHECK(rel_err(dbeta_c, dbeta) < 1e-5);
  }
}

TEST_CASE("Gated DeltaNet's CPU ops give the same bits for any OpenMP thread count", "[backend][deltanet]") {
  // Data parallelism splits the host's threads over the ranks: a rank's results must not depend on how many it has.
  auto be = mt::make_cpu_backend();
  const int64_t batch = 2, seq = 300, T = batch * seq, C = 96, K = 4, n = 4;
  DeltaRuleShape s = rule_shape(batch, seq, 2, n, 16, 24);
  const std::vector<int32_t> lens = {300, 211};
  s.seq_lens = lens.data();
  const auto x = random_floats(T * C, 51), w = random_floats(C * K, 52), dy = random_floats(T * C, 53);
  const auto qkv = random_floats(T * s.row(), 54), g = decays(T * n, 55), beta = betas(T * n, 56);
  const auto d_o = random_floats(T * s.value_dim(), 57), ba = random_floats(T * 2 * n, 58);
  const auto a_log = random_floats(n, 59), dt_bias = random_floats(n, 60), z = random_floats(T * C, 61);
  const auto wn = random_floats(C, 62);
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    std::vector<std::vector<float>> out;
    out.reserve(12);  // the references below stay valid
    auto& dx = out.emplace_back(T * C);
    auto& dw = out.emplace_back(C * K);
    be->causal_conv1d_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), batch, seq, C, K, nullptr);
    auto& o = out.emplace_back(T * s.value_dim());
    be->gated_delta_rule_forward(o.data(), qkv.data(), g.data(), beta.data(), s);
    auto& dqkv = out.emplace_back(T * s.row());
    auto& dg = out.emplace_back(T * n);
    auto& dbeta = out.emplace_back(T * n);
    be->gated_delta_rule_backward(dqkv.data(), dg.data(), dbeta.data(), d_o.data(), qkv.data(), g.data(), beta.data(), s);
    auto& dba = out.emplace_back(T * 2 * n);
    auto& da = out.emplace_back(n);
    auto& ddt = out.emplace_back(n);
    be->deltanet_gates_backward(dba.data(), da.data(), ddt.data(), dg.data(), dbeta.data(), ba.data(), a_log.data(),
                                dt_bias.data(), T, n);
    auto& gdx = out.emplace_back(T * C);
    auto& gdz = out.emplace_back(T * C);
    auto& gdw = out.emplace_back(C);
    be->gated_rmsnorm_backward(gdx.data(), gdz.data(), gdw.data(), dy.data(), x.data(), z.data(), wn.data(), T, C, 1e-6f);
    return out;
  };
  const auto one = run(1), two = run(2), three = run(3);
  omp_set_num_threads(omp_get_num_procs());
  for (size_t i = 0; i < one.size(); ++i) {
    INFO("output " << i);
    CHECK(one[i] == two[i]);
    CHECK(one[i] == three[i]);
  }
}

TEST_CASE("chunked delta rule's gate gradient stays exact where decays are strong (transformers' A_log init)",
          "[backend][deltanet]") {
  // A_log = log U(0.01, 16) makes g reach −20 per token: the state forgets almost at once and the gate gradients
  // of those heads are tiny. What dt_bias and A_log see is Σ_t dg_t (times −A·σ or g): the chunked form must give
  // it as the recurrent one does, not with the rounding of the large cumulative decays it starts from.
  auto be = mt::make_cpu_backend();
  const int64_t seq = 150, nv = 4;
  DeltaRuleShape s = rule_shape(2, seq, 2, nv, 16, 16);
  const std::vector<int32_t> lens = {150, 77};
  s.seq_lens = lens.data();
  const int64_t T = 2 * seq;
  auto qkv = random_floats(T * s.row(), 31), beta = betas(T * nv, 33), d_o = random_floats(T * s.value_dim(), 34);
  std::vector<float> g(T * nv);
  const float scale[nv] = {0.02f, 1.f, 8.f, 20.f};  // −exp(A_log) per head
  const auto u = random_floats(T * nv, 32);
  for (int64_t i = 0; i < T * nv; ++i) g[i] = -scale[i % nv] * std::log1p(std::exp(u[i]));
  std::vector<float> dqkv(T * s.row()), dg(T * nv), dbeta(T * nv), dqkv_c(T * s.row()), dg_c(T * nv), dbeta_c(T * nv);
  be->gated_delta_rule_backward(dqkv.data(), dg.data(), dbeta.data(), d_o.data(), qkv.data(), g.data(), beta.data(), s);
  mt::cpu::gated_delta_rule_chunked_backward(dqkv_c.data(), dg_c.data(), dbeta_c.data(), d_o.data(), qkv.data(),
                                             g.data(), beta.data(), s, 64);
  for (int64_t h = 0; h < nv; ++h) {
    double sum = 0, sum_c = 0, weighted = 0, weighted_c = 0, magnitude = 0;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t i = t * nv + h;
      sum += dg[i], sum_c += dg_c[i], weighted += double(dg[i]) * g[i], weighted_c += double(dg_c[i]) * g[i];
      magnitude += std::abs(double(dg[i]));
    }
    INFO("head " << h << " (−exp(A_log) " << scale[h] << "): Σdg " << sum << " chunked " << sum_c << ", Σdg·g "
                 << weighted << " chunked " << weighted_c << ", Σ|dg| " << magnitude);
    CHECK(std::abs(sum_c - sum) <= 1e-4 * std::abs(sum));
    CHECK(std::abs(weighted_c - weighted) <= 1e-4 * std::abs(weighted));
  }
}
