// The CUDA ops of multi-head latent attention against the CPU reference: attention with a value head dim other than
// the q/k one (DeepSeek-V3's 192 / 128, GLM-4.7-Flash's 256 / 256 beside a 64 / 96 wider value, tiny dims on element
// loads), with padding, segments, a window and GQA, fp32 and bf16, forward and the deterministic backward; the
// per-head concatenation of the queries' and keys' [nope | rope] parts, forward and backward (the shared rotary key's
// gradient summed over the heads); and the CUDA backend's dispatch of both (cuDNN refuses the mixed dims, our kernels
// run them).
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "kernels/runtime/cuda_backend.h"
#include "gpu/gpu_test_util.h"
#include "kernels/ops/kernels.h"

using namespace mt::test;
namespace cu = mt::cuda;

namespace {

struct MlaAttnCase {
  const char* name;
  int64_t batch, seq, heads, kv_heads, head_dim, v_head_dim, window;
  std::vector<int32_t> seq_lens;  // empty: all valid
  bool segmented;
};

// Packed-example ids: a new example every 29 tokens, distinct per sequence.
std::vector<int32_t> segments_of(int64_t batch, int64_t seq) {
  std::vector<int32_t> seg(static_cast<size_t>(batch * seq));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < seq; ++i) seg[static_cast<size_t>(b * seq + i)] = static_cast<int32_t>(100 * b + i / 29);
  return seg;
}

const std::vector<MlaAttnCase>& mla_attention_cases() {
  static const std::vector<MlaAttnCase> cases = {
      {"DeepSeek-V3 192/128, padding, longer than a tile", 2, 300, 4, 4, 192, 128, 0, {300, 171}, false},
      {"GLM-4.7-Flash 256/256 (equal dims, the MLA call)", 1, 150, 2, 2, 256, 256, 0, {}, false},
      {"value wider than q/k 64/96, GQA 2, segments, padding", 2, 130, 4, 2, 64, 96, 0, {130, 90}, true},
      {"tiny 16/12 (element loads), window 37, padding", 2, 100, 4, 4, 16, 12, 37, {100, 61}, false},
      {"192/128 MQA, window 100, segments", 1, 260, 8, 1, 192, 128, 100, {}, true},
  };
  return cases;
}

}  // namespace

TEST_CASE("cuda attention with a value head dim other than the q/k one matches the reference", "[gpu][attention][mla]") {
  MT_REQUIRE_GPU();
  for (const MlaAttnCase& c : mla_attention_cases()) {
    DYNAMIC_SECTION("attention " << c.name) {
      const int64_t T = c.batch * c.seq, q_size = T * c.heads * c.head_dim, k_size = T * c.kv_heads * c.head_dim;
      const int64_t o_size = T * c.heads * c.v_head_dim, v_size = T * c.kv_heads * c.v_head_dim;
      const int64_t lse_size = c.batch * c.heads * c.seq;
      const auto segments = c.segmented ? segments_of(c.batch, c.seq) : std::vector<int32_t>{};
      mt::AttnShape host{.batch = c.batch, .seq = c.seq, .n_heads = c.heads, .n_kv_heads = c.kv_heads,
                         .head_dim = c.head_dim, .v_head_dim = c.v_head_dim, .window = c.window};
      host.seq_lens = c.seq_lens.empty() ? nullptr : c.seq_lens.data();
      host.segments = segments.empty() ? nullptr : segments.data();
      auto d_lens = upload_ints(c.seq_lens.empty() ? std::vector<int32_t>{0} : c.seq_lens);
      auto d_segments = upload_ints(segments.empty() ? std::vector<int32_t>{0} : segments);
      mt::AttnShape dev = host;
      dev.seq_lens = host.seq_lens != nullptr ? d_lens->get() : nullptr;
      dev.segments = host.segments != nullptr ? d_segments->get() : nullptr;
      const auto q0 = random_floats(q_size, 31), k0 = random_floats(k_size, 32);
      const auto v0 = random_floats(v_size, 33), dout0 = random_floats(o_size, 34);
      for_each_dtype([&]<typename T>() {
        INFO(dtype_label<T>);
        const auto q = rounded<T>(q0), k = rounded<T>(k0), v = rounded<T>(v0), dout = rounded<T>(dout0);
        std::vector<float> out_ref(o_size), lse_ref(lse_size), dq_ref(q_size), dk_ref(k_size), dv_ref(v_size);
        cpu().attention_forward(out_ref.data(), lse_ref.data(), q.data(), k.data(), v.data(), host);
        cpu().attention_backward(dq_ref.data(), dk_ref.data(), dv_ref.data(), dout.data(), q.data(), k.data(),
                                 v.data(), out_ref.data(), lse_ref.data(), host);
        auto d_q = upload<T>(q), d_k = upload<T>(k), d_v = upload<T>(v), d_dout = upload<T>(dout);
        DeviceBuffer<T> out(o_size), dq(q_size), dk(k_size), dv(v_size), dq2(q_size), dk2(k_size), dv2(v_size);
        DeviceBuffer<float> lse(lse_size);
        cu::attention_forward<T>(out.get(), lse.get(), d_q->get(), d_k->get(), d_v->get(), dev, test_stream());
        cu::attention_backward<T>(dq.get(), dk.get(), dv.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(),
                                  out.get(), lse.get(), dev, test_stream());
        cu::attention_backward<T>(dq2.get(), dk2.get(), dv2.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(),
                                  out.get(), lse.get(), dev, test_stream());
        const auto got_dq = download(dq), got_dk = download(dk), got_dv = download(dv);
        check_close("mla attention out", download(out), out_ref, tolerance<T>);
        check_close("mla attention lse", download(lse), lse_ref, 1e-5);
        check_close("mla attention dq", got_dq, dq_ref, tolerance<T>);
        check_close("mla attention dk", got_dk, dk_ref, tolerance<T>);
        check_close("mla attention dv", got_dv, dv_ref, tolerance<T>);
        CHECK(same_bits(got_dq, download(dq2)));
        CHECK(same_bits(got_dk, download(dk2)));
        CHECK(same_bits(got_dv, download(dv2)));
      });
    }
  }
}

TEST_CASE("cuda head_concat forward and backward (per-head and shared second part) match the reference",
          "[gpu][mla]") {
  MT_REQUIRE_GPU();
  struct Case {
    int64_t T, H, a_dim, b_dim;
    bool shared;
  };
  for (const Case& c : {Case{37, 4, 128, 64, false}, Case{37, 128, 128, 64, true}, Case{5, 3, 8, 8, true},
                        Case{9, 2, 7, 3, false}}) {
    DYNAMIC_SECTION("T " << c.T << " H " << c.H << " parts " << c.a_dim << " | " << c.b_dim
                         << (c.shared ? " shared" : "")) {
      const int64_t y_size = c.T * c.H * (c.a_dim + c.b_dim), a_size = c.T * c.H * c.a_dim;
      const int64_t b_size = c.T * (c.shared ? 1 : c.H) * c.b_dim;
      const auto a0 = random_floats(a_size, 41), b0 = random_floats(b_size, 42), dy0 = random_floats(y_size, 43);
      for_each_dtype([&]<typename T>() {
        INFO(dtype_label<T>);
        const auto a = rounded<T>(a0), b = rounded<T>(b0), dy = rounded<T>(dy0);
        std::vector<float> y_ref(y_size), da_ref(a_size), db_ref(b_size);
        cpu().head_concat_forward(y_ref.data(), a.data(), b.data(), c.T, c.H, c.a_dim, c.b_dim, c.shared);
        cpu().head_concat_backward(da_ref.data(), db_ref.data(), dy.data(), c.T, c.H, c.a_dim, c.b_dim, c.shared);
        auto d_a = upload<T>(a), d_b = upload<T>(b), d_dy = upload<T>(dy);
        DeviceBuffer<T> y(y_size), da(a_size), db(b_size);
        cu::head_concat_forward<T>(y.get(), d_a->get(), d_b->get(), c.T, c.H, c.a_dim, c.b_dim, c.shared,
                                   test_stream());
        cu::head_concat_backward<T>(da.get(), db.get(), d_dy->get(), c.T, c.H, c.a_dim, c.b_dim, c.shared,
                                    test_stream());
        CHECK(same_bits(download(y), y_ref));  // copies are exact
        CHECK(same_bits(download(da), da_ref));
        check_close("head_concat db", download(db), db_ref, c.shared ? tolerance<T> : 0.0);
      });
    }
  }
}

// Through the backend's dispatch: fp32 on our kernel, bf16 on cuDNN's fused attention where it covers the shape
// (a value head dim of its own, V, O and their gradients at that width) and on ours where it does not.
TEST_CASE("cuda backend runs latent attention's mixed head dims (ours in fp32, cuDNN's in bf16)", "[gpu][mla]") {
  MT_REQUIRE_GPU();
  for (const auto& [hd, vd] : {std::pair<int64_t, int64_t>{24, 16}, {192, 128}}) {
    for (const mt::DType dt : {mt::DType::f32, mt::DType::bf16}) {
      INFO(mt::dtype_name(dt) << " q/k head dim " << hd << ", value " << vd);
      auto be = mt::make_cuda_backend(dt, 0, mt::environment_switches());
      const int64_t batch = 2, seq = 70, heads = 4, T = batch * seq;
      const auto q = rounded_to(dt, random_floats(T * heads * hd, 51));
      const auto k = rounded_to(dt, random_floats(T * heads * hd, 52));
      const auto v = rounded_to(dt, random_floats(T * heads * vd, 53));
      const auto dout = rounded_to(dt, random_floats(T * heads * vd, 54));
      const mt::AttnShape shape{.batch = batch, .seq = seq, .n_heads = heads, .n_kv_heads = heads, .head_dim = hd,
                                .v_head_dim = vd};
      std::vector<float> out_ref(T * heads * vd), lse_ref(batch * heads * seq), dq_ref(q.size()), dk_ref(k.size()),
          dv_ref(v.size());
      cpu().attention_forward(out_ref.data(), lse_ref.data(), q.data(), k.data(), v.data(), shape);
      cpu().attention_backward(dq_ref.data(), dk_ref.data(), dv_ref.data(), dout.data(), q.data(), k.data(), v.data(),
                               out_ref.data(), lse_ref.data(), shape);
      BackendBuffer d_q(*be, q, dt), d_k(*be, k, dt), d_v(*be, v, dt), d_dout(*be, dout, dt);
      BackendBuffer out(*be, T * heads * vd, dt), dq(*be, T * heads * hd, dt), dk(*be, T * heads * hd, dt),
          dv(*be, T * heads * vd, dt), lse(*be, batch * heads * seq, mt::DType::f32);
      be->attention_forward(out.get(), lse.floats(), d_q.get(), d_k.get(), d_v.get(), shape);
      be->attention_backward(dq.get(), dk.get(), dv.get(), d_dout.get(), d_q.get(), d_k.get(), d_v.get(), out.get(),
                             lse.floats(), shape);
      const double tol = tolerance_of(dt);
      check_close("backend mla out", out.read(), out_ref, tol);
      check_close("backend mla lse", lse.read(), lse_ref, 1e-5);
      check_close("backend mla dq", dq.read(), dq_ref, tol);
      check_close("backend mla dk", dk.read(), dk_ref, tol);
      check_close("backend mla dv", dv.read(), dv_ref, tol);
    }
  }
}
