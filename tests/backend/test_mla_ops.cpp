// The CPU reference ops that multi-head latent attention adds or extends: attention whose value head dim differs from
// the q/k one (against finite differences, both wider and narrower values, GQA, padding, both backward orders) and
// the per-head concatenation of two parts (its backward the transpose of its forward, a shared part's gradient summed
// over the heads).
#include <omp.h>

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/grad_check.h"
#include "catch.h"

using namespace mt::test;

TEST_CASE("attention with a value head dim other than the q/k one matches finite differences", "[backend][mla]") {
  auto be = mt::make_cpu_backend();
  const std::vector<int32_t> lens{7, 4};
  const int saved_threads = omp_get_max_threads();
  for (const int64_t vd : {3, 10}) {
    for (const int64_t kv_heads : {4, 2}) {
      for (const int threads : {1, 64}) {  // one task per (batch, kv head); 64: dq and dk/dv in two passes
        CAPTURE(vd, kv_heads, threads);
        omp_set_num_threads(threads);
        mt::AttnShape s{.batch = 2, .seq = 7, .n_heads = 4, .n_kv_heads = kv_heads, .head_dim = 6, .v_head_dim = vd};
        s.seq_lens = lens.data();
        const int64_t T = s.batch * s.seq;
        auto q = random_floats(T * 4 * 6, 1), k = random_floats(T * kv_heads * 6, 2);
        auto v = random_floats(T * kv_heads * vd, 3);
        const auto r = random_floats(T * 4 * vd, 4);
        std::vector<float> out(static_cast<size_t>(T * 4 * vd)), lse(static_cast<size_t>(s.batch * 4 * s.seq));
        auto loss = [&] {
          be->attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), s);
          return project(r, out);
        };
        loss();
        std::vector<float> dq(q.size(), 7.f), dk(k.size(), 7.f), dv(v.size(), 7.f);
        be->attention_backward(dq.data(), dk.data(), dv.data(), r.data(), q.data(), k.data(), v.data(), out.data(),
                               lse.data(), s);
        CHECK(rel_err(dq, numeric_grad(q, loss)) < 1e-3);
        CHECK(rel_err(dk, numeric_grad(k, loss)) < 1e-3);
        CHECK(rel_err(dv, numeric_grad(v, loss)) < 1e-3);
        for (int64_t e = 0; e < 4 * vd; ++e) CHECK(out[static_cast<size_t>((s.seq + 5) * 4 * vd + e)] == 0.f);
      }
    }
  }
  omp_set_num_threads(saved_threads);
}

TEST_CASE("head_concat joins per-head parts and its backward is the transpose", "[backend][mla]") {
  auto be = mt::make_cpu_backend();
  const int64_t T = 3, H = 4, a_dim = 5, b_dim = 2;
  for (const bool shared : {false, true}) {
    CAPTURE(shared);
    const auto a = random_floats(T * H * a_dim, 1), b = random_floats(T * (shared ? 1 : H) * b_dim, 2);
    std::vector<float> y(static_cast<size_t>(T * H * (a_dim + b_dim)));
    be->head_concat_forward(y.data(), a.data(), b.data(), T, H, a_dim, b_dim, shared);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        const float* row = y.data() + (t * H + h) * (a_dim + b_dim);
        CHECK(row[0] == a[static_cast<size_t>((t * H + h) * a_dim)]);
        CHECK(row[a_dim + 1] == b[static_cast<size_t>((shared ? t : t * H + h) * b_dim + 1)]);
      }
    // ⟨dy, concat(a, b)⟩ = ⟨da, a⟩ + ⟨db, b⟩ for the backward's da, db.
    const auto dy = random_floats(static_cast<int64_t>(y.size()), 3);
    std::vector<float> da(a.size(), 7.f), db(b.size(), 7.f);
    be->head_concat_backward(da.data(), db.data(), dy.data(), T, H, a_dim, b_dim, shared);
    CHECK(approx_equal(project(dy, y), project(da, a) + project(db, b), 1e-5));
  }
}
