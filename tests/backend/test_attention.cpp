// CPU backend attention: forward and lse against a naive masked full softmax (causal, window, right padding,
// segments, GQA), padded rows are zero and inert, backward against finite differences.
#include <cmath>
#include <limits>

#include "backend/backend.h"
#include "backend/grad_check.h"
#include "catch.h"

using mt::test::numeric_grad;
using mt::test::project;
using mt::test::random_floats;
using mt::test::rel_err;

namespace {

struct Case {
  mt::AttnShape shape;
  std::vector<int32_t> seq_lens, segments;
  int64_t T() const { return shape.batch * shape.seq; }
  int64_t q_size() const { return T() * shape.n_heads * shape.head_dim; }
  int64_t kv_size() const { return T() * shape.n_kv_heads * shape.head_dim; }
  int64_t valid(int64_t b) const { return seq_lens.empty() ? shape.seq : seq_lens[b]; }
};

// 2 sequences of 7, GQA 4 query / 2 kv heads, window 3, second sequence padded to 5, packed segments.
Case masked_case() {
  Case c;
  c.shape = {.batch = 2, .seq = 7, .n_heads = 4, .n_kv_heads = 2, .head_dim = 4, .window = 3};
  c.seq_lens = {7, 5};
  c.segments = {0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, 3, 9, 9};
  c.shape.seq_lens = c.seq_lens.data();
  c.shape.segments = c.segments.data();
  return c;
}

// Plain causal multi-head attention, no padding.
Case plain_case() {
  Case c;
  c.shape = {.batch = 1, .seq = 5, .n_heads = 2, .n_kv_heads = 2, .head_dim = 3};
  return c;
}

bool visible(const Case& c, int64_t b, int64_t i, int64_t j) {
  const auto& s = c.shape;
  if (j > i || i >= c.valid(b)) return false;
  if (s.window > 0 && i - j >= s.window) return false;
  return c.segments.empty() || c.segments[b * s.seq + i] == c.segments[b * s.seq + j];
}

// Full-softmax reference in fp64: out [T, n_heads*hd], lse [batch, n_heads, seq].
void naive_attention(const Case& c, const std::vector<float>& q, const std::vector<float>& k,
                     const std::vector<float>& v, std::vector<double>& out, std::vector<double>& lse) {
  const auto& s = c.shape;
  const int64_t hd = s.head_dim, qs = s.n_heads * hd, ks = s.n_kv_heads * hd;
  out.assign(c.q_size(), 0.0);
  lse.assign(s.batch * s.n_heads * s.seq, 0.0);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.n_heads; ++h) {
      const int64_t kvh = h / (s.n_heads / s.n_kv_heads);
      for (int64_t i = 0; i < c.valid(b); ++i) {
        const float* qi = q.data() + (b * s.seq + i) * qs + h * hd;
        double* oi = out.data() + (b * s.seq + i) * qs + h * hd;
        std::vector<double> sc(s.seq, -std::numeric_limits<double>::infinity());
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < s.seq; ++j) {
          if (!visible(c, b, i, j)) continue;
          double d = 0.0;
          for (int64_t e = 0; e < hd; ++e) d += double(qi[e]) * k[(b * s.seq + j) * ks + kvh * hd + e];
          sc[j] = d / std::sqrt(double(hd));
          m = std::max(m, sc[j]);
        }
        double z = 0.0;
        for (int64_t j = 0; j < s.seq; ++j) z += std::exp(sc[j] - m);
        lse[(b * s.n_heads + h) * s.seq + i] = m + std::log(z);
        for (int64_t j = 0; j < s.seq; ++j) {
          const double p = std::exp(sc[j] - m) / z;
          for (int64_t e = 0; e < hd; ++e) oi[e] += p * v[(b * s.seq + j) * ks + kvh * hd + e];
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("attention_forward matches a naive masked softmax", "[backend][attention]") {
  auto be = mt::make_cpu_backend();
  for (const Case& c : {masked_case(), plain_case()}) {
    const auto& s = c.shape;
    auto q = random_floats(c.q_size(), 1), k = random_floats(c.kv_size(), 2), v = random_floats(c.kv_size(), 3);
    std::vector<float> out(c.q_size(), 42.f), lse(s.batch * s.n_heads * s.seq, 42.f);
    be->attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), s);
    std::vector<double> want_out, want_lse;
    naive_attention(c, q, k, v, want_out, want_lse);
    CHECK(rel_err(out, want_out) < 1e-6);
    CHECK(rel_err(lse, want_lse) < 1e-6);
  }
}

TEST_CASE("attention padded rows are zero and do not influence valid rows", "[backend][attention]") {
  auto be = mt::make_cpu_backend();
  const Case c = masked_case();
  const auto& s = c.shape;
  const int64_t qs = s.n_heads * s.head_dim, ks = s.n_kv_heads * s.head_dim;
  auto q = random_floats(c.q_size(), 4), k = random_floats(c.kv_size(), 5), v = random_floats(c.kv_size(), 6);
  std::vector<float> out(c.q_size()), lse(s.batch * s.n_heads * s.seq);
  be->attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), s);
  // sequence 1 is padded from position 5
  for (int64_t i = 5; i < s.seq; ++i) {
    const int64_t t = s.seq + i;
    for (int64_t e = 0; e < qs; ++e) CHECK(out[t * qs + e] == 0.f);
    for (int64_t h = 0; h < s.n_heads; ++h) CHECK(lse[(s.n_heads + h) * s.seq + i] == 0.f);
    for (int64_t e = 0; e < qs; ++e) q[t * qs + e] = 1e3f;
    for (int64_t e = 0; e < ks; ++e) k[t * ks + e] = v[t * ks + e] = -1e3f;
  }
  std::vector<float> out2(c.q_size()), lse2(s.batch * s.n_heads * s.seq);
  be->attention_forward(out2.data(), lse2.data(), q.data(), k.data(), v.data(), s);
  CHECK(out2 == out);
  CHECK(lse2 == lse);

  std::vector<float> dq(c.q_size(), 7.f), dk(c.kv_size(), 7.f), dv(c.kv_size(), 7.f);
  const auto dout = random_floats(c.q_size(), 7);
  be->attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), out2.data(),
                         lse2.data(), s);
  for (int64_t i = 5; i < s.seq; ++i) {
    const int64_t t = s.seq + i;
    for (int64_t e = 0; e < qs; ++e) CHECK(dq[t * qs + e] == 0.f);
    for (int64_t e = 0; e < ks; ++e) CHECK((dk[t * ks + e] == 0.f && dv[t * ks + e] == 0.f));
  }
}

TEST_CASE("attention_backward matches finite differences", "[backend][attention]") {
  auto be = mt::make_cpu_backend();
  for (const Case& c : {masked_case(), plain_case()}) {
    const auto& s = c.shape;
    auto q = random_floats(c.q_size(), 8), k = random_floats(c.kv_size(), 9), v = random_floats(c.kv_size(), 10);
    const auto r = random_floats(c.q_size(), 11);
    std::vector<float> out(c.q_size()), lse(s.batch * s.n_heads * s.seq);
    auto loss = [&] {
      be->attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), s);
      return project(r, out);
    };
    loss();
    std::vector<float> dq(c.q_size(), 7.f), dk(c.kv_size(), 7.f), dv(c.kv_size(), 7.f);
    be->attention_backward(dq.data(), dk.data(), dv.data(), r.data(), q.data(), k.data(), v.data(), out.data(),
                           lse.data(), s);
    CHECK(rel_err(dq, numeric_grad(q, loss, 1e-3f)) < 1e-2);
    CHECK(rel_err(dk, numeric_grad(k, loss, 1e-3f)) < 1e-2);
    CHECK(rel_err(dv, numeric_grad(v, loss, 1e-3f)) < 1e-2);
  }
}
