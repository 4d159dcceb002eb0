// CUDA kernels (kernels/kernels.h) against the CPU reference (mt::cpu, or fp64 loops here for ops without one): per op a
// table of shapes × {fp32, bf16}, forward and backward, ‖out − ref‖/‖ref‖ within tolerance<T>; bf16 inputs are rounded
// first and compared with the fp32 reference of the rounded inputs; deterministic ops run twice, compared bit for bit.
#include <cmath>
#include <random>

#include "backend/cpu/cpu_ops.h"
#include "gpu/gpu_test_util.h"
#include "kernels/kernels.h"

namespace {

using namespace mt::test;
namespace cu = mt::cuda;

std::vector<int32_t> random_ints(int64_t n, int32_t lo, int32_t hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(lo, hi);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int32_t& x : v) x = dist(rng);
  return v;
}

std::vector<float> tail(const std::vector<float>& v, int64_t from) { return {v.begin() + from, v.end()}; }

}  // namespace

TEST_CASE("cuda add, cast and accumulate match the reference", "[gpu][elementwise]") {
  MT_REQUIRE_GPU();
  for (const int64_t n : {int64_t{1}, int64_t{13}, int64_t{4099}, int64_t{1} << 20}) {
    for (const int64_t off : {int64_t{0}, int64_t{1}}) {  // off = 1: pointers not 16-byte aligned (scalar path)
      INFO("n = " << n << ", offset " << off);
      const auto x0 = random_floats(n + off, 1), y0 = random_floats(n + off, 2);
      for_each_dtype([&]<typename T>() {
        INFO(dtype_label<T>);
        const auto x = rounded<T>(x0), y = rounded<T>(y0);
        auto dx = upload<T>(x), dy = upload<T>(y);
        cu::add<T>(dy->get() + off, dx->get() + off, n, test_stream());
        std::vector<float> want = y;
        for (int64_t i = off; i < n + off; ++i) want[i] = y[i] + x[i];
        check_close("add", download(*dy), want, tolerance<T>);

        auto src = upload<float>(x0);
        DeviceBuffer<T> narrow(n + off), same(n + off);
        DeviceBuffer<float> wide(n + off);
        cu::cast<T, float>(narrow.get() + off, src->get() + off, n, test_stream());
        cu::cast<float, T>(wide.get() + off, narrow.get() + off, n, test_stream());
        cu::cast<T, T>(same.get() + off, narrow.get() + off, n, test_stream());
        check_close("cast to T", tail(download(narrow), off), tail(x, off), 0.0);  // exact: round to nearest even
        check_close("cast to fp32", tail(download(wide), off), tail(x, off), 0.0);
        check_close("cast T to T", tail(download(same), off), tail(x, off), 0.0);
      });
      auto dx = upload<float>(x0), dy = upload<float>(y0);
      cu::accumulate(dy->get() + off, dx->get() + off, n, test_stream());
      std::vector<float> want = y0;
      for (int64_t i = off; i < n + off; ++i) want[i] = y0[i] + x0[i];
      check_close("accumulate", download(*dy), want, 0.0);
    }
  }
}

TEST_CASE("cuda swiglu forward and backward match the reference", "[gpu][swiglu]") {
  MT_REQUIRE_GPU();
  for (const int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{65539}, int64_t{1} << 20}) {
    INFO("n = " << n);
    const auto g0 = random_floats(n, 3, 3.f), u0 = random_floats(n, 4), dy0 = random_floats(n, 5);
    for_each_dtype([&]<typename T>() {
      INFO(dtype_label<T>);
      const auto g = rounded<T>(g0), u = rounded<T>(u0), dy = rounded<T>(dy0);
      auto d_g = upload<T>(g), d_u = upload<T>(u), d_dy = upload<T>(dy);
      DeviceBuffer<T> y(n), dg(n), du(n);
      cu::swiglu_forward<T>(y.get(), d_g->get(), d_u->get(), n, test_stream());
      cu::swiglu_backward<T>(dg.get(), du.get(), d_dy->get(), d_g->get(), d_u->get(), n, test_stream());
      std::vector<float> y_ref(n), dg_ref(n), du_ref(n);
      mt::cpu::swiglu_forward(y_ref.data(), g.data(), u.data(), n);
      mt::cpu::swiglu_backward(dg_ref.data(), du_ref.data(), dy.data(), g.data(), u.data(), n);
      check_close("swiglu y", download(y), y_ref, tolerance<T>);
      check_close("swiglu dgate", download(dg), dg_ref, tolerance<T>);
      check_close("swiglu dup", download(du), du_ref, tolerance<T>);
    });
  }
}

TEST_CASE("cuda embedding forward and deterministic backward match the reference", "[gpu][embedding]") {
  MT_REQUIRE_GPU();
  struct Shape {
    int64_t T, V, H;
  };
  for (const Shape c : {Shape{1, 3, 8}, Shape{37, 11, 6}, Shape{600, 50, 256}, Shape{5000, 7, 64},
                        Shape{4096, 1000, 1024}}) {
    INFO("T = " << c.T << ", V = " << c.V << ", H = " << c.H);
    const auto ids = random_ints(c.T, 0, static_cast<int32_t>(c.V - 1), 6);
    const auto table0 = random_floats(c.V * c.H, 7), dy0 = random_floats(c.T * c.H, 8);
    const auto dtable0 = random_floats(c.V * c.H, 9);
    auto d_ids = upload_ints(ids);
    for_each_dtype([&]<typename T>() {
      INFO(dtype_label<T>);
      const auto table = rounded<T>(table0), dy = rounded<T>(dy0);
      auto d_table = upload<T>(table), d_dy = upload<T>(dy);
      DeviceBuffer<T> y(c.T * c.H);
      cu::embedding_forward<T>(y.get(), d_table->get(), d_ids->get(), c.T, c.H, test_stream());
      std::vector<float> y_ref(c.T * c.H), dtable_ref = dtable0;
      mt::cpu::embedding_forward(y_ref.data(), table.data(), ids.data(), c.T, c.H);
      check_close("embedding y", download(y), y_ref, 0.0);

      auto dtable = upload<float>(dtable0), dtable_again = upload<float>(dtable0);
      cu::embedding_backward<T>(dtable->get(), d_dy->get(), d_ids->get(), c.T, c.H, test_stream());
      cu::embedding_backward<T>(dtable_again->get(), d_dy->get(), d_ids->get(), c.T, c.H, test_stream());
      mt::cpu::embedding_backward(dtable_ref.data(), dy.data(), ids.data(), c.T, c.H);
      const auto got = download(*dtable);
      check_close("embedding dtable", got, dtable_ref, 1e-6);
      CHECK(got == download(*dtable_again));
    });
  }
}

TEST_CASE("cuda rmsnorm forward and backward match the reference", "[gpu][rmsnorm]") {
  MT_REQUIRE_GPU();
  struct Shape {
    int64_t N, D;
  };
  const float eps = 1e-6f;
  for (const Shape c : {Shape{1, 6}, Shape{7, 128}, Shape{300, 2048}, Shape{1000, 100}, Shape{64, 8192}}) {
    INFO("N = " << c.N << ", D = " << c.D);
    const auto x0 = random_floats(c.N * c.D, 10, 2.f), w0 = random_floats(c.D, 11), dy0 = random_floats(c.N * c.D, 12);
    const auto dw0 = random_floats(c.D, 13);
    for_each_dtype([&]<typename T>() {
      INFO(dtype_label<T>);
      const auto x = rounded<T>(x0), w = rounded<T>(w0), dy = rounded<T>(dy0);
      auto d_x = upload<T>(x), d_w = upload<T>(w), d_dy = upload<T>(dy);
      auto dw = upload<float>(dw0), dw_again = upload<float>(dw0);
      DeviceBuffer<T> y(c.N * c.D), dx(c.N * c.D);
      cu::rmsnorm_forward<T>(y.get(), d_x->get(), d_w->get(), c.N, c.D, eps, test_stream());
      cu::rmsnorm_backward<T>(dx.get(), dw->get(), d_dy->get(), d_x->get(), d_w->get(), c.N, c.D, eps, test_stream());
      cu::rmsnorm_backward<T>(dx.get(), dw_again->get(), d_dy->get(), d_x->get(), d_w->get(), c.N, c.D, eps,
                              test_stream());
      std::vector<float> y_ref(c.N * c.D), dx_ref(c.N * c.D), dw_ref = dw0;
      mt::cpu::rmsnorm_forward(y_ref.data(), x.data(), w.data(), c.N, c.D, eps);
      mt::cpu::rmsnorm_backward(dx_ref.data(), dw_ref.data(), dy.data(), x.data(), w.data(), c.N, c.D, eps);
      check_close("rmsnorm y", download(y), y_ref, tolerance<T>);
      check_close("rmsnorm dx", download(dx), dx_ref, tolerance<T>);
      const auto got_dw = download(*dw);
      check_close("rmsnorm dw", got_dw, dw_ref, tolerance<T>);
      CHECK(got_dw == download(*dw_again));
    });
  }
}

TEST_CASE("cuda rope forward and backward match the reference", "[gpu][rope]") {
  MT_REQUIRE_GPU();
  struct Shape {
    int64_t T, heads, head_dim, rot_dim, max_pos;
  };
  for (const Shape c : {Shape{5, 2, 8, 8, 16}, Shape{33, 3, 6, 4, 40}, Shape{100, 4, 128, 128, 128},
                        Shape{64, 2, 128, 64, 100}, Shape{50, 3, 64, 32, 60}}) {
    INFO("T = " << c.T << ", heads = " << c.heads << ", head_dim = " << c.head_dim << ", rot_dim = " << c.rot_dim);
    const int64_t half = c.rot_dim / 2, n = c.T * c.heads * c.head_dim;
    std::vector<float> cos(c.max_pos * half), sin(c.max_pos * half);
    for (int64_t p = 0; p < c.max_pos; ++p) {
      for (int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(p) * std::pow(10000.0, -2.0 * static_cast<double>(i) / c.rot_dim);
        cos[p * half + i] = static_cast<float>(std::cos(angle));
        sin[p * half + i] = static_cast<float>(std::sin(angle));
      }
    }
    const auto positions = random_ints(c.T, 0, static_cast<int32_t>(c.max_pos - 1), 14);
    const auto x0 = random_floats(n, 15);
    auto d_cos = upload<float>(cos), d_sin = upload<float>(sin);
    auto d_pos = upload_ints(positions);
    for_each_dtype([&]<typename T>() {
      INFO(dtype_label<T>);
      const auto x = rounded<T>(x0);
      auto fwd = upload<T>(x), bwd = upload<T>(x);
      cu::rope_forward<T>(fwd->get(), d_cos->get(), d_sin->get(), d_pos->get(), c.T, c.heads, c.head_dim, c.rot_dim,
                          test_stream());
      cu::rope_backward<T>(bwd->get(), d_cos->get(), d_sin->get(), d_pos->get(), c.T, c.heads, c.head_dim, c.rot_dim,
                           test_stream());
      auto fwd_ref = x, bwd_ref = x;
      mt::cpu::rope_forward(fwd_ref.data(), cos.data(), sin.data(), positions.data(), c.T, c.heads, c.head_dim,
                            c.rot_dim);
      mt::cpu::rope_backward(bwd_ref.data(), cos.data(), sin.data(), positions.data(), c.T, c.heads, c.head_dim,
                             c.rot_dim);
      check_close("rope forward", download(*fwd), fwd_ref, tolerance<T>);
      check_close("rope backward", download(*bwd), bwd_ref, tolerance<T>);
    });
  }
}

TEST_CASE("cuda bias forward and deterministic backward match the reference", "[gpu][bias]") {
  MT_REQUIRE_GPU();
  struct Shape {
    int64_t T, O;
  };
  for (const Shape c : {Shape{1, 3}, Shape{37, 7}, Shape{100, 256}, Shape{4096, 520}, Shape{3, 11008}}) {
    INFO("T = " << c.T << ", O = " << c.O);
    const auto y0 = random_floats(c.T * c.O, 16), b0 = random_floats(c.O, 17), dy0 = random_floats(c.T * c.O, 18);
    const auto db0 = random_floats(c.O, 19);
    for_each_dtype([&]<typename T>() {
      INFO(dtype_label<T>);
      const auto y = rounded<T>(y0), b = rounded<T>(b0), dy = rounded<T>(dy0);
      auto d_y = upload<T>(y), d_b = upload<T>(b), d_dy = upload<T>(dy);
      auto db = upload<float>(db0), db_again = upload<float>(db0);
      cu::bias_forward<T>(d_y->get(), d_b->get(), c.T, c.O, test_stream());
      cu::bias_backward<T>(db->get(), d_dy->get(), c.T, c.O, test_stream());
      cu::bias_backward<T>(db_again->get(), d_dy->get(), c.T, c.O, test_stream());
      std::vector<float> y_ref = y, db_ref = db0;
      for (int64_t o = 0; o < c.O; ++o) {
        double sum = 0.0;
        for (int64_t t = 0; t < c.T; ++t) {
          y_ref[t * c.O + o] += b[o];
          sum += dy[t * c.O + o];
        }
        db_ref[o] += static_cast<float>(sum);
      }
      check_close("bias y", download(*d_y), y_ref, tolerance<T>);
      const auto got_db = download(*db);
      check_close("bias db", got_db, db_ref, 1e-6);
      CHECK(got_db == download(*db_again));
    });
  }
}

namespace {

struct AttnCase {
  int64_t batch, seq, heads, kv_heads, head_dim, window;
  std::vector<int32_t> seq_lens;  // empty: all valid
  bool segmented;
};

// Packed-example ids: runs of random length, distinct per sequence.
std::vector<int32_t> make_segments(int64_t batch, int64_t seq, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> seg(static_cast<size_t>(batch * seq));
  for (int64_t b = 0; b < batch; ++b) {
    int32_t id = static_cast<int32_t>(100 * b);
    for (int64_t i = 0; i < seq; ++i) {
      if (i > 0 && rng() % 23 == 0) ++id;
      seg[b * seq + i] = id;
    }
  }
  return seg;
}

// Elements of rows at padded positions (i >= seq_lens[b]) that are not exactly zero; row_width elements per token.
int64_t nonzero_padding(const std::vector<float>& v, const AttnCase& c, int64_t row_width) {
  int64_t bad = 0;
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t len = c.seq_lens.empty() ? c.seq : c.seq_lens[b];
    for (int64_t i = len; i < c.seq; ++i) {
      for (int64_t e = 0; e < row_width; ++e) bad += v[(b * c.seq + i) * row_width + e] != 0.f;
    }
  }
  return bad;
}

}  // namespace

TEST_CASE("cuda attention forward and deterministic backward match the reference", "[gpu][attention]") {
  MT_REQUIRE_GPU();
  const std::vector<AttnCase> cases = {
      {1, 17, 2, 2, 16, 0, {}, false},              // plain causal
      {2, 130, 4, 2, 64, 0, {130, 77}, false},      // GQA, padding
      {1, 600, 2, 1, 128, 100, {}, false},          // sliding window, MQA
      {2, 130, 2, 1, 6, 0, {130, 50}, true},        // tiny head_dim, segments, padding
      {3, 2, 1, 1, 64, 0, {2, 0, 1}, false},        // an empty sequence, one of length 1
      {1, 600, 4, 2, 128, 0, {517}, false},         // long, padded
      {2, 130, 8, 2, 64, 37, {130, 100}, true},     // window, GQA 4, segments, padding
      {2, 17, 3, 1, 16, 5, {17, 9}, true},          // everything at once, small
      {1, 70, 2, 2, 200, 0, {}, false},             // head_dim bucket 256 (column-split backward)
      {2, 96, 4, 4, 96, 0, {96, 95}, false},        // head_dim 96 in bucket 128
      {4, 1024, 16, 2, 64, 0, {1024, 1000, 999, 512}, false},  // GQA 8 split in part over blocks (132 SMs: 4 of 8)
  };
  for (const AttnCase& c : cases) {
    INFO("batch " << c.batch << " seq " << c.seq << " heads " << c.heads << "/" << c.kv_heads << " head_dim "
                  << c.head_dim << " window " << c.window << " padded " << !c.seq_lens.empty() << " segments "
                  << c.segmented);
    const int64_t T = c.batch * c.seq, q_size = T * c.heads * c.head_dim, kv_size = T * c.kv_heads * c.head_dim;
    const int64_t lse_size = c.batch * c.heads * c.seq;
    const auto segments = c.segmented ? make_segments(c.batch, c.seq, 20) : std::vector<int32_t>{};
    mt::AttnShape host{.batch = c.batch, .seq = c.seq, .n_heads = c.heads, .n_kv_heads = c.kv_heads,
                       .head_dim = c.head_dim, .window = c.window};
    host.seq_lens = c.seq_lens.empty() ? nullptr : c.seq_lens.data();
    host.segments = segments.empty() ? nullptr : segments.data();
    auto d_lens = upload_ints(c.seq_lens.empty() ? std::vector<int32_t>{0} : c.seq_lens);
    auto d_segments = upload_ints(segments.empty() ? std::vector<int32_t>{0} : segments);
    mt::AttnShape dev = host;
    dev.seq_lens = host.seq_lens != nullptr ? d_lens->get() : nullptr;
    dev.segments = host.segments != nullptr ? d_segments->get() : nullptr;

    const auto q0 = random_floats(q_size, 21), k0 = random_floats(kv_size, 22), v0 = random_floats(kv_size, 23);
    const auto dout0 = random_floats(q_size, 24);
    for_each_dtype([&]<typename T>() {
      INFO(dtype_label<T>);
      const auto q = rounded<T>(q0), k = rounded<T>(k0), v = rounded<T>(v0), dout = rounded<T>(dout0);
      std::vector<float> out_ref(q_size), lse_ref(lse_size), dq_ref(q_size), dk_ref(kv_size), dv_ref(kv_size);
      mt::cpu::attention_forward(out_ref.data(), lse_ref.data(), q.data(), k.data(), v.data(), host);
      mt::cpu::attention_backward(dq_ref.data(), dk_ref.data(), dv_ref.data(), dout.data(), q.data(), k.data(),
                                  v.data(), out_ref.data(), lse_ref.data(), host);

      auto d_q = upload<T>(q), d_k = upload<T>(k), d_v = upload<T>(v), d_dout = upload<T>(dout);
      DeviceBuffer<T> out(q_size), dq(q_size), dk(kv_size), dv(kv_size), dq2(q_size), dk2(kv_size), dv2(kv_size);
      DeviceBuffer<float> lse(lse_size);
      cu::attention_forward<T>(out.get(), lse.get(), d_q->get(), d_k->get(), d_v->get(), dev, test_stream());
      cu::attention_backward<T>(dq.get(), dk.get(), dv.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(),
                                out.get(), lse.get(), dev, test_stream());
      cu::attention_backward<T>(dq2.get(), dk2.get(), dv2.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(),
                                out.get(), lse.get(), dev, test_stream());
      const auto got_out = download(out), got_dq = download(dq), got_dk = download(dk), got_dv = download(dv);
      check_close("attention out", got_out, out_ref, tolerance<T>);
      check_close("attention lse", download(lse), lse_ref, 1e-5);
      check_close("attention dq", got_dq, dq_ref, tolerance<T>);
      check_close("attention dk", got_dk, dk_ref, tolerance<T>);
      check_close("attention dv", got_dv, dv_ref, tolerance<T>);
      CHECK(nonzero_padding(got_out, c, c.heads * c.head_dim) == 0);
      CHECK(nonzero_padding(got_dq, c, c.heads * c.head_dim) == 0);
      CHECK(nonzero_padding(got_dk, c, c.kv_heads * c.head_dim) == 0);
      CHECK(nonzero_padding(got_dv, c, c.kv_heads * c.head_dim) == 0);
      CHECK(got_dq == download(dq2));
      CHECK(got_dk == download(dk2));
      CHECK(got_dv == download(dv2));
    });
  }
}

TEST_CASE("cuda cross_entropy matches an fp64 softmax, in place too", "[gpu][cross_entropy]") {
  MT_REQUIRE_GPU();
  struct Shape {
    int64_t rows, V;
  };
  const float scale = 0.37f;
  for (const Shape c : {Shape{1, 5}, Shape{3, 4}, Shape{7, 1001}, Shape{64, 32000}, Shape{4, 151936}}) {
    INFO("rows = " << c.rows << ", V = " << c.V);
    const auto logits = random_floats(c.rows * c.V, 25, 4.f);
    auto targets = random_ints(c.rows, 0, static_cast<int32_t>(c.V - 1), 26);
    for (int64_t r = 1; r < c.rows; r += 3) targets[r] = -100;
    std::vector<float> loss_ref(c.rows, 0.f), grad_ref(c.rows * c.V, 0.f);
    for (int64_t r = 0; r < c.rows; ++r) {
      if (targets[r] == -100) continue;
      const float* x = logits.data() + r * c.V;
      double m = x[0], sum = 0.0;
      for (int64_t j = 0; j < c.V; ++j) m = std::max(m, static_cast<double>(x[j]));
      for (int64_t j = 0; j < c.V; ++j) sum += std::exp(x[j] - m);
      const double lse = m + std::log(sum);
      loss_ref[r] = static_cast<float>(lse - x[targets[r]]);
      for (int64_t j = 0; j < c.V; ++j) {
        grad_ref[r * c.V + j] = static_cast<float>(scale * (std::exp(x[j] - lse) - (j == targets[r] ? 1.0 : 0.0)));
      }
    }
    auto d_targets = upload_ints(targets);
    for_each_dtype([&]<typename T>() {
      INFO(dtype_label<T>);
      auto d_logits = upload<float>(logits);
      DeviceBuffer<T> dlogits(c.rows * c.V);
      DeviceBuffer<float> loss(c.rows);
      cu::cross_entropy<T>(dlogits.get(), loss.get(), d_logits->get(), d_targets->get(), c.rows, c.V, scale,
                           test_stream());
      const auto got_grad = download(dlogits), got_loss = download(loss);
      check_close("cross_entropy row_loss", got_loss, loss_ref, 1e-5);
      check_close("cross_entropy dlogits", got_grad, grad_ref, tolerance<T>);
      if constexpr (is_f32<T>) {
        DeviceBuffer<float> loss_in_place(c.rows);
        cu::cross_entropy<float>(d_logits->get(), loss_in_place.get(), d_logits->get(), d_targets->get(), c.rows, c.V,
                                 scale, test_stream());
        CHECK(download(*d_logits) == got_grad);
        CHECK(download(loss_in_place) == got_loss);
      }
    });
  }
}

TEST_CASE("cuda cross_entropy marks out-of-range targets with NaN", "[gpu][cross_entropy]") {
  MT_REQUIRE_GPU();
  auto d_logits = upload<float>(random_floats(2 * 8, 27));
  auto d_targets = upload_ints({8, -100});
  DeviceBuffer<float> dlogits(2 * 8), loss(2);
  cu::cross_entropy<float>(dlogits.get(), loss.get(), d_logits->get(), d_targets->get(), 2, 8, 1.f, test_stream());
  const auto got = download(loss);
  CHECK(std::isnan(got[0]));
  CHECK(got[1] == 0.f);
}

TEST_CASE("cuda sum_squares and sum are exact in fp64 and deterministic", "[gpu][reduce]") {
  MT_REQUIRE_GPU();
  for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{1000}, (int64_t{1} << 22) + 3}) {
    for (const int64_t off : {int64_t{0}, int64_t{1}}) {
      INFO("n = " << n << ", offset " << off);
      const auto x = random_floats(n + off, 28);
      double ss = 0.0, s = 0.0, abs_s = 0.0;
      for (int64_t i = off; i < n + off; ++i) {
        ss += static_cast<double>(x[i]) * x[i];
        s += x[i];
        abs_s += std::abs(x[i]);
      }
      auto d_x = upload<float>(x);
      DeviceBuffer<double> out(4);
      cu::sum_squares(out.get(), d_x->get() + off, n, test_stream());
      cu::sum_squares(out.get() + 1, d_x->get() + off, n, test_stream());
      cu::sum(out.get() + 2, d_x->get() + off, n, test_stream());
      cu::sum(out.get() + 3, d_x->get() + off, n, test_stream());
      const auto got = out.read<double>();
      CHECK(std::abs(got[0] - ss) <= 1e-12 * ss);
      CHECK(std::abs(got[2] - s) <= 1e-12 * abs_s);
      CHECK(got[0] == got[1]);
      CHECK(got[2] == got[3]);
    }
  }
}
