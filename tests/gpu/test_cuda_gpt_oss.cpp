// The CUDA backend's GPT-OSS ops against the CPU reference, through the Backend interface, in fp32 and bf16:
// attention with sinks (the Sink forward variant: out and lse; the unchanged backward kernels under the sink-including
// lse; the sinks' gradient) over GPT-OSS's shapes (head_dim 64, GQA 8, window 128) and small ones, the top-k-logits
// softmax router with the load-balancing term, the clamped SwiGLU across its clamps (dense, and over one [rows, 2·cols]
// gate_up buffer), per-expert biases of grouped rows (O 2I: the [gate_bias | up_bias] row).
#include <algorithm>
#include <string>

#include "backend/backend.h"
#include "kernels/runtime/cuda_backend.h"
#include "gpu/gpu_test_util.h"

namespace {

using namespace mt::test;
using mt::DType;

const char* label(DType dt) { return dt == DType::f32 ? "float32" : "bfloat16"; }

struct SinkCase {
  const char* name;
  int64_t batch, seq, heads, kv_heads, head_dim, window;
  std::vector<int32_t> seq_lens;  // empty: all valid
};
const std::vector<SinkCase> sink_cases = {
    {"GPT-OSS sliding layer: 64/8 heads of 64, window 128, padding", 2, 300, 64, 8, 64, 128, {300, 171}},
    {"GPT-OSS full layer: 64/8 heads of 64, padding", 1, 257, 64, 8, 64, 0, {250}},
    {"small: 4/2 heads of 16, window 5, an empty sequence", 3, 17, 4, 2, 16, 5, {17, 0, 9}},
    {"head_dim 128, MHA, no padding", 1, 130, 4, 4, 128, 0, {}},
};

}  // namespace

TEST_CASE("cuda attention with sinks (forward variant, backward, sinks' gradient) matches the CPU backend",
          "[gpu][attention][sinks]") {
  MT_REQUIRE_GPU();
  for (const SinkCase& c : sink_cases)
    for (const DType dt : {DType::f32, DType::bf16}) {
      INFO(c.name << " " << label(dt));
      auto be = mt::make_cuda_backend(dt, 0, mt::environment_switches());
      const double tol = tolerance_of(dt);
      const int64_t T = c.batch * c.seq, qs = T * c.heads * c.head_dim, kvs = T * c.kv_heads * c.head_dim;
      const int64_t lse_size = c.batch * c.heads * c.seq;
      const auto q = rounded_to(dt, random_floats(qs, 31)), k = rounded_to(dt, random_floats(kvs, 32));
      const auto v = rounded_to(dt, random_floats(kvs, 33)), dout = rounded_to(dt, random_floats(qs, 34));
      const auto sinks = rounded_to(dt, random_floats(c.heads, 35, 2.f));
      mt::AttnShape host{.batch = c.batch, .seq = c.seq, .n_heads = c.heads, .n_kv_heads = c.kv_heads,
                         .head_dim = c.head_dim, .window = c.window};
      host.seq_lens = c.seq_lens.empty() ? nullptr : c.seq_lens.data();
      host.sinks = sinks.data();
      BackendBuffer d_q(*be, q, dt), d_k(*be, k, dt), d_v(*be, v, dt), d_dout(*be, dout, dt), d_sinks(*be, sinks, dt);
      Ints d_lens(*be, c.seq_lens.empty() ? std::vector<int32_t>{0} : c.seq_lens);
      mt::AttnShape dev = host;
      dev.seq_lens = host.seq_lens != nullptr ? d_lens.p : nullptr;
      dev.sinks = d_sinks.get();
      BackendBuffer out(*be, qs, dt), lse(*be, lse_size, DType::f32), dq(*be, qs, dt), dk(*be, kvs, dt), dv(*be, kvs, dt);
      BackendBuffer grad(*be, std::vector<float>(c.heads, 0.5f), DType::f32);
      be->attention_forward(out.get(), lse.floats(), d_q.get(), d_k.get(), d_v.get(), dev);
      be->attention_backward(dq.get(), dk.get(), dv.get(), d_dout.get(), d_q.get(), d_k.get(), d_v.get(), out.get(),
                             lse.floats(), dev);
      be->attention_sinks_backward(grad.floats(), d_dout.get(), out.get(), lse.floats(), dev);
      std::vector<float> out_ref(qs), lse_ref(lse_size), dq_ref(qs), dk_ref(kvs), dv_ref(kvs), grad_ref(c.heads, 0.5f);
      cpu().attention_forward(out_ref.data(), lse_ref.data(), q.data(), k.data(), v.data(), host);
      cpu().attention_backward(dq_ref.data(), dk_ref.data(), dv_ref.data(), dout.data(), q.data(), k.data(), v.data(),
                               out_ref.data(), lse_ref.data(), host);
      cpu().attention_sinks_backward(grad_ref.data(), dout.data(), out_ref.data(), lse_ref.data(), host);
      check_close("sinks attention out", out.read(), out_ref, tol);
      check_close("sinks attention lse", lse.read(), lse_ref, 1e-5);
      check_close("sinks attention dq", dq.read(), dq_ref, tol);
      check_close("sinks attention dk", dk.read(), dk_ref, tol);
      check_close("sinks attention dv", dv.read(), dv_ref, tol);
      check_close("attention d_sinks", grad.read(), grad_ref, tol);
    }
}

TEST_CASE("cuda topk_softmax router (GPT-OSS) forward and backward with the load-balancing term match the CPU backend",
          "[gpu][moe]") {
  MT_REQUIRE_GPU();
  struct Row {
    int64_t T, E, k;
  };
  for (const Row& c : {Row{300, 128, 4}, Row{37, 32, 4}, Row{5, 4, 2}, Row{20, 300, 4}})  // 300: one thread a token
    for (const DType dt : {DType::f32, DType::bf16}) {
      INFO("T " << c.T << " E " << c.E << " k " << c.k << " " << label(dt));
      auto be = mt::make_cuda_backend(dt, 0, mt::environment_switches());
      mt::MoeRouting r;
      r.experts = c.E, r.top_k = c.k, r.topk_softmax = true;
      const auto logits = rounded_to(dt, random_floats(c.T * c.E, 41, 2.f));
      const int64_t R = c.T * c.k, seq = (c.T + 1) / 2;
      BackendBuffer d_logits(*be, logits, dt), probs(*be, c.T * c.E, DType::f32), weights(*be, R, DType::f32);
      Ints idx(*be, std::vector<int32_t>(static_cast<size_t>(R), -1));
      be->moe_route_forward(probs.floats(), idx.p, weights.floats(), d_logits.get(), c.T, r);
      std::vector<float> probs_ref(c.T * c.E), weights_ref(R);
      std::vector<int32_t> idx_ref(R), idx_got(R);
      cpu().moe_route_forward(probs_ref.data(), idx_ref.data(), weights_ref.data(), logits.data(), c.T, r);
      be->download(idx_got.data(), idx.p, R * 4);
      CHECK(idx_got == idx_ref);
      check_close("topk_softmax probs", probs.read(), probs_ref, 1e-5);
      check_close("topk_softmax weights", weights.read(), weights_ref, 1e-5);
      const std::vector<int32_t> lens = {static_cast<int32_t>(seq), static_cast<int32_t>(std::max<int64_t>(c.T - seq - 1, 0))};
      const auto dw = random_floats(R, 42), aux = random_floats(c.E, 43, 0.1f);
      BackendBuffer d_dw(*be, dw, DType::f32), d_aux(*be, aux, DType::f32), dlog(*be, c.T * c.E, dt);
      Ints d_lens(*be, lens);
      be->moe_route_backward(dlog.get(), d_dw.floats(), probs.floats(), idx.p, weights.floats(), d_aux.floats(),
                             d_lens.p, seq, c.T, r);
      std::vector<float> dlog_ref(c.T * c.E);
      cpu().moe_route_backward(dlog_ref.data(), dw.data(), probs_ref.data(), idx_ref.data(), weights_ref.data(),
                               aux.data(), lens.data(), seq, c.T, r);
      check_close("topk_softmax d_logits", dlog.read(), dlog_ref, tolerance_of(dt));
    }
}

TEST_CASE("cuda clamped SwiGLU (GPT-OSS) forward and backward match the CPU backend, dense and over gate_up",
          "[gpu][glu]") {
  MT_REQUIRE_GPU();
  struct Shape {
    int64_t rows, cols;
    bool fused;  // gate and up the halves of one [rows, 2·cols] buffer (ld 2·cols), as the MoE block's gate_up
  };
  for (const Shape& c : {Shape{1, 1, false}, Shape{1, 1000, false}, Shape{1, 300 * 2880 + 7, false},
                         Shape{300, 2880, true}, Shape{37, 7, true}, Shape{5, 1, true}})
    for (const DType dt : {DType::f32, DType::bf16}) {
      const int64_t n = c.rows * c.cols, ld = c.fused ? 2 * c.cols : c.cols, stored = c.rows * ld;
      INFO("rows " << c.rows << " cols " << c.cols << " ld " << ld << " " << label(dt));
      auto be = mt::make_cuda_backend(dt, 0, mt::environment_switches());
      const float alpha = 1.702f, limit = 7.f;
      const int64_t up_at = c.fused ? c.cols : 0;  // up's first element in its buffer
      const int64_t es = static_cast<int64_t>(mt::dtype_size(dt));
      // std 6: a good share of the values beyond the clamps on both sides.
      const auto gate = rounded_to(dt, random_floats(stored, 51, 6.f));
      const auto up = rounded_to(dt, random_floats(stored, 52, 6.f));
      const auto dy = rounded_to(dt, random_floats(n, 53));
      BackendBuffer d_gate(*be, gate, dt), d_up_buf(*be, up, dt), d_dy(*be, dy, dt), y(*be, n, dt),
          dg(*be, stored, dt), du_buf(*be, stored, dt);
      // Fused: up and its gradient sit in the gate's buffers, cols along.
      auto in_gate = [&](const BackendBuffer& b) { return static_cast<char*>(b.get()) + up_at * es; };
      void* d_up = c.fused ? in_gate(d_gate) : d_up_buf.get();
      void* du = c.fused ? in_gate(dg) : du_buf.get();
      be->clamped_swiglu_forward(y.get(), d_gate.get(), d_up, c.rows, c.cols, ld, alpha, limit);
      be->clamped_swiglu_backward(dg.get(), du, d_dy.get(), d_gate.get(), d_up, c.rows, c.cols, ld, alpha, limit);
      std::vector<float> y_ref(n), dg_ref(stored), du_ref(stored);
      const float* up_ref = c.fused ? gate.data() + up_at : up.data();
      float* du_ref_at = c.fused ? dg_ref.data() + up_at : du_ref.data();
      cpu().clamped_swiglu_forward(y_ref.data(), gate.data(), up_ref, c.rows, c.cols, ld, alpha, limit);
      cpu().clamped_swiglu_backward(dg_ref.data(), du_ref_at, dy.data(), gate.data(), up_ref, c.rows, c.cols, ld, alpha,
                                    limit);
      const double tol = dt == DType::f32 ? 1e-6 : 1e-2;  // one rounding to bf16 per output
      check_close("clamped swiglu y", y.read(), y_ref, tol);
      check_close(c.fused ? "clamped swiglu d_gate_up" : "clamped swiglu dgate", dg.read(), dg_ref, tol);
      if (!c.fused) check_close("clamped swiglu dup", du_buf.read(), du_ref, tol);
    }
}

TEST_CASE("cuda grouped bias forward and deterministic backward match the CPU backend", "[gpu][moe]") {
  MT_REQUIRE_GPU();
  struct Row {
    int64_t E, O;
    std::vector<int32_t> rows_per_expert;  // 0: an expert without rows
    int64_t pad;  // stride O + pad: 3 leaves the rows unaligned (scalar adds)
  };  // O 5760 with pad 0: GPT-OSS's [gate_bias | up_bias] rows [E, 2I] on the MoE block's gate_up [R, 2I]
  for (const Row& c : {Row{4, 64, {3, 0, 5, 1}, 3}, Row{32, 5760, std::vector<int32_t>(32, 9), 3},
                       Row{128, 2880, std::vector<int32_t>(128, 0), 3}, Row{4, 64, {3, 0, 5, 1}, 0},
                       Row{32, 5760, std::vector<int32_t>(32, 9), 0},
                       Row{16, 2880, {40, 0, 1, 7, 300, 2, 0, 9, 64, 1, 1, 1, 5, 0, 3, 130}, 2880}})
    for (const DType dt : {DType::f32, DType::bf16}) {
      std::vector<int32_t> offsets = {0};
      for (const int32_t n : c.rows_per_expert) offsets.push_back(offsets.back() + n);
      if (c.E == 128) offsets.back() = 2;  // only the last expert has rows
      const int64_t R = offsets.back(), stride = c.O + c.pad;
      INFO("E " << c.E << " O " << c.O << " stride " << stride << " R " << R << " " << label(dt));
      auto be = mt::make_cuda_backend(dt, 0, mt::environment_switches());
      const auto b = rounded_to(dt, random_floats(c.E * stride, 61)), y0 = rounded_to(dt, random_floats(R * c.O, 62));
      const auto dy = rounded_to(dt, random_floats(R * c.O, 63));
      BackendBuffer d_b(*be, b, dt), y(*be, y0, dt), d_dy(*be, dy, dt);
      BackendBuffer db(*be, std::vector<float>(c.E * stride, 0.25f), DType::f32);
      Ints d_offsets(*be, offsets);
      be->grouped_bias_forward(y.get(), d_b.get(), stride, d_offsets.p, c.E, R, c.O);
      be->grouped_bias_backward(db.floats(), d_dy.get(), stride, d_offsets.p, c.E, R, c.O);
      auto y_ref = y0;
      std::vector<float> db_ref(c.E * stride, 0.25f);
      cpu().grouped_bias_forward(y_ref.data(), b.data(), stride, offsets.data(), c.E, R, c.O);
      cpu().grouped_bias_backward(db_ref.data(), dy.data(), stride, offsets.data(), c.E, R, c.O);
      if (R > 0) check_close("grouped bias y", y.read(), y_ref, tolerance_of(dt));
      check_close("grouped bias db", db.read(), db_ref, 1e-5);
    }
}
