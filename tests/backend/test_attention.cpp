// CPU backend attention: forward and lse against a naive masked full softmax (causal, window, right padding,
// segments, GQA, custom scale, Gemma 2 soft-capping, ALiBi with a non-power-of-two head count), padded rows are zero
// and inert, backward against finite differences, and the many-thread (by rows) paths bitwise the one-thread ones.
#include <omp.h>

#include <cmath>
#include <cstring>
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
  std::vector<float> slopes;
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

// ALiBi slopes for n heads as BLOOM and Baichuan 2 compute them: a geometric sequence for the largest power of two
// ≤ n, then every other slope of the next power's sequence.
std::vector<float> alibi_slopes(int64_t n) {
  const int64_t p = int64_t{1} << static_cast<int>(std::floor(std::log2(double(n))));
  std::vector<float> s;
  const double base = std::pow(2.0, -std::pow(2.0, -(std::log2(double(p)) - 3)));
  for (int64_t i = 1; i <= p; ++i) s.push_back(static_cast<float>(std::pow(base, double(i))));
  const double extra = std::pow(2.0, -std::pow(2.0, -(std::log2(double(2 * p)) - 3)));
  for (int64_t i = 1; i < 2 * (n - p); i += 2) s.push_back(static_cast<float>(std::pow(extra, double(i))));
  return s;
}

// Gemma 2 style: the masked geometry with a custom scale and logit soft-capping (scores of std ≈ 1.2 against a cap
// of 1.5, so the tanh bends them).
Case softcap_case() {
  Case c = masked_case();
  c.shape.scale = 0.6f;
  c.shape.softcap = 1.5f;
  return c;
}

// Baichuan 2 style ALiBi over 6 query heads (not a power of two) sharing 3 kv heads, padding and segments.
Case alibi_case() {
  Case c;
  c.shape = {.batch = 2, .seq = 7, .n_heads = 6, .n_kv_heads = 3, .head_dim = 4};
  c.seq_lens = {6, 7};
  c.segments = {0, 0, 0, 0, 1, 1, 1, 4, 4, 4, 4, 4, 4, 4};
  c.slopes = alibi_slopes(6);
  c.shape.seq_lens = c.seq_lens.data();
  c.shape.segments = c.segments.data();
  c.shape.alibi_slopes = c.slopes.data();
  return c;
}

// Everything at once: GQA 6 query / 2 kv heads, window 4, second sequence padded to 5, segments, scale, cap, ALiBi.
Case combined_case() {
  Case c;
  c.shape = {.batch = 2, .seq = 7, .n_heads = 6, .n_kv_heads = 2, .head_dim = 4, .window = 4, .scale = 0.45f,
             .softcap = 2.f};
  c.seq_lens = {7, 5};
  c.segments = {0, 0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 3, 9, 9};
  c.slopes = alibi_slopes(6);
  c.shape.seq_lens = c.seq_lens.data();
  c.shape.segments = c.segments.data();
  c.shape.alibi_slopes = c.slopes.data();
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
          double logit = d * (s.scale != 0.f ? double(s.scale) : 1.0 / std::sqrt(double(hd)));
          if (s.softcap > 0.f) logit = s.softcap * std::tanh(logit / s.softcap);
          if (s.alibi_slopes != nullptr) logit += double(s.alibi_slopes[h]) * double(j - i);
          sc[j] = logit;
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
  for (const Case& c : {masked_case(), plain_case(), softcap_case(), alibi_case(), combined_case()}) {
    const auto& s = c.shape;
    CAPTURE(s.n_heads, s.scale, s.softcap, s.alibi_slopes != nullptr);
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
  const bool extended = GENERATE(false, true);
  const Case c = extended ? combined_case() : masked_case();
  const auto& s = c.shape;
  CAPTURE(extended);
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

// The soft-capped and ALiBi cases differentiate the fp64 reference (checked against the op above), which costs no
// thread start-ups per evaluation: the op's backward runs once per case.
TEST_CASE("attention_backward with scale, soft-cap and ALiBi matches finite differences", "[backend][attention]") {
  auto be = mt::make_cpu_backend();
  for (const Case& c : {softcap_case(), alibi_case(), combined_case()}) {
    const auto& s = c.shape;
    CAPTURE(s.n_heads, s.scale, s.softcap, s.alibi_slopes != nullptr);
    auto q = random_floats(c.q_size(), 20), k = random_floats(c.kv_size(), 21), v = random_floats(c.kv_size(), 22);
    const auto r = random_floats(c.q_size(), 23);
    auto loss = [&] {
      std::vector<double> want_out, want_lse;
      naive_attention(c, q, k, v, want_out, want_lse);
      double sum = 0.0;
      for (size_t i = 0; i < want_out.size(); ++i) sum += r[i] * want_out[i];
      return sum;
    };
    std::vector<float> out(c.q_size()), lse(s.batch * s.n_heads * s.seq);
    be->attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), s);
    std::vector<float> dq(c.q_size(), 7.f), dk(c.kv_size(), 7.f), dv(c.kv_size(), 7.f);
    be->attention_backward(dq.data(), dk.data(), dv.data(), r.data(), q.data(), k.data(), v.data(), out.data(),
                           lse.data(), s);
    CHECK(rel_err(dq, numeric_grad(q, loss, 1e-3f)) < 1e-3);
    CHECK(rel_err(dk, numeric_grad(k, loss, 1e-3f)) < 1e-3);
    CHECK(rel_err(dv, numeric_grad(v, loss, 1e-3f)) < 1e-3);
  }
}

TEST_CASE("attention scale 0 means 1/sqrt(head_dim), bitwise", "[backend][attention]") {
  auto be = mt::make_cpu_backend();
  const Case c = masked_case();
  mt::AttnShape explicit_scale = c.shape;
  explicit_scale.scale = static_cast<float>(1.0 / std::sqrt(double(c.shape.head_dim)));
  auto q = random_floats(c.q_size(), 12), k = random_floats(c.kv_size(), 13), v = random_floats(c.kv_size(), 14);
  const auto dout = random_floats(c.q_size(), 15);
  const int64_t n_lse = c.shape.batch * c.shape.n_heads * c.shape.seq;
  std::vector<float> out(c.q_size()), lse(n_lse), out2(c.q_size()), lse2(n_lse);
  be->attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), c.shape);
  be->attention_forward(out2.data(), lse2.data(), q.data(), k.data(), v.data(), explicit_scale);
  CHECK(out == out2);
  CHECK(lse == lse2);
  std::vector<float> dq(c.q_size()), dk(c.kv_size()), dv(c.kv_size()), dq2(c.q_size()), dk2(c.kv_size()),
      dv2(c.kv_size());
  be->attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), out.data(),
                         lse.data(), c.shape);
  be->attention_backward(dq2.data(), dk2.data(), dv2.data(), dout.data(), q.data(), k.data(), v.data(), out.data(),
                         lse.data(), explicit_scale);
  CHECK(dq == dq2);
  CHECK(dk == dk2);
  CHECK(dv == dv2);
}

TEST_CASE("attention with zero ALiBi slopes and a vast soft-cap is plain attention", "[backend][attention]") {
  auto be = mt::make_cpu_backend();
  const Case c = masked_case();
  const std::vector<float> zero_slopes(c.shape.n_heads, 0.f);
  mt::AttnShape ext = c.shape;
  ext.softcap = 1e6f;
  ext.alibi_slopes = zero_slopes.data();
  auto q = random_floats(c.q_size(), 16), k = random_floats(c.kv_size(), 17), v = random_floats(c.kv_size(), 18);
  const auto dout = random_floats(c.q_size(), 19);
  const int64_t n_lse = c.shape.batch * c.shape.n_heads * c.shape.seq;
  std::vector<float> out(c.q_size()), lse(n_lse), out2(c.q_size()), lse2(n_lse);
  be->attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), c.shape);
  be->attention_forward(out2.data(), lse2.data(), q.data(), k.data(), v.data(), ext);
  CHECK(rel_err(out2, out) < 1e-6);
  CHECK(rel_err(lse2, lse) < 1e-6);
  std::vector<float> dq(c.q_size()), dk(c.kv_size()), dv(c.kv_size()), dq2(c.q_size()), dk2(c.kv_size()),
      dv2(c.kv_size());
  be->attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), out.data(),
                         lse.data(), c.shape);
  be->attention_backward(dq2.data(), dk2.data(), dv2.data(), dout.data(), q.data(), k.data(), v.data(), out2.data(),
                         lse2.data(), ext);
  CHECK(rel_err(dq2, dq) < 1e-5);
  CHECK(rel_err(dk2, dk) < 1e-5);
  CHECK(rel_err(dv2, dv) < 1e-5);
}

TEST_CASE("attention ALiBi slopes follow BLOOM's sequence for 6 heads", "[backend][attention]") {
  const std::vector<float> want = {0.25f, 0.0625f, 0.015625f, 0.00390625f, 0.5f, 0.125f};
  CHECK(alibi_slopes(6) == want);
  CHECK(alibi_slopes(8) == std::vector<float>{0.5f, 0.25f, 0.125f, 0.0625f, 0.03125f, 0.015625f, 0.0078125f,
                                              0.00390625f});
}

// With few (batch, kv head) tasks for its threads the backward runs as two passes by rows (dq by query, dk/dv by key)
// and the forward by query rows: the same bits as on one thread, where the backward runs as one pass by kv head.
TEST_CASE("attention by rows on many threads is bitwise the one-thread result", "[backend][attention]") {
  auto be = mt::make_cpu_backend();
  Case longer;
  longer.shape = {.batch = 1, .seq = 300, .n_heads = 3, .n_kv_heads = 1, .head_dim = 8, .window = 40, .scale = 0.3f,
                  .softcap = 2.f};
  longer.seq_lens = {287};
  longer.shape.seq_lens = longer.seq_lens.data();
  const int threads = omp_get_max_threads();
  for (const Case& c : {masked_case(), softcap_case(), alibi_case(), combined_case(), plain_case(), longer}) {
    const auto& s = c.shape;
    const auto q = random_floats(c.q_size(), 91), k = random_floats(c.kv_size(), 92);
    const auto v = random_floats(c.kv_size(), 93), dout = random_floats(c.q_size(), 94);
    std::vector<std::vector<float>> runs[2];
    for (const int n : {1, 64}) {  // 64 > 2 · batch · kv heads: the backward by rows
      omp_set_num_threads(n);
      std::vector<float> out(q.size()), lse(static_cast<size_t>(s.batch * s.n_heads * s.seq)), dq(q.size()),
          dk(k.size()), dv(v.size());
      be->attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), s);
      be->attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), out.data(),
                             lse.data(), s);
      runs[n == 1 ? 0 : 1] = {out, lse, dq, dk, dv};
    }
    omp_set_num_threads(threads);
    for (size_t t = 0; t < 5; ++t) {
      INFO("seq " << s.seq << " heads " << s.n_heads << "/" << s.n_kv_heads << " tensor " << t);
      CHECK(std::memcmp(runs[0][t].data(), runs[1][t].data(), runs[0][t].size() * sizeof(float)) == 0);
    }
  }
}
