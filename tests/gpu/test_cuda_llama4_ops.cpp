// The CUDA backend's Llama 4 ops against the CPU reference, through the Backend interface, in fp32 and bf16: the
// weightless q/k RMS norm (forward, backward), the NoPE layers' attention temperature (its factor within CUDA's log1pf
// ulp of the host's), the expert-input scaling of the routed rows (forward, backward with the routing weights' gradient)
// and chunked attention (the chunk ids of chunked_attention.h as segments, the window at the chunk, packed examples).
#include <cmath>
#include <numeric>
#include <string>

#include "backend/backend.h"
#include "kernels/runtime/cuda_backend.h"
#include "engine/chunked_attention.h"
#include "gpu/gpu_test_util.h"

namespace {

using namespace mt::test;
using mt::DType;

}  // namespace

TEST_CASE("cuda rms_normalize (Llama 4's q/k L2 norm) forward and backward match the CPU backend",
          "[gpu][llama4]") {
  MT_REQUIRE_GPU();
  struct Case {
    int64_t N, D;
  };
  for (const Case c : {Case{37 * 40, 128}, Case{5, 8}, Case{3, 256}, Case{1, 6}})
    for (const DType dt : {DType::f32, DType::bf16}) {
      INFO("N " << c.N << " D " << c.D << " " << (dt == DType::f32 ? "float32" : "bfloat16"));
      auto be = mt::make_cuda_backend(dt, 0, mt::environment_switches());
      const auto x = rounded_to(dt, random_floats(c.N * c.D, 1, 3.f)), dy = rounded_to(dt, random_floats(c.N * c.D, 2));
      BackendBuffer d_x(*be, x, dt), d_dy(*be, dy, dt), y(*be, c.N * c.D, dt), dx(*be, c.N * c.D, dt);
      be->rms_normalize_forward(y.get(), d_x.get(), c.N, c.D, 1e-5f);
      be->rms_normalize_backward(dx.get(), d_dy.get(), d_x.get(), c.N, c.D, 1e-5f);
      std::vector<float> y_ref(x.size()), dx_ref(x.size());
      cpu().rms_normalize_forward(y_ref.data(), x.data(), c.N, c.D, 1e-5f);
      cpu().rms_normalize_backward(dx_ref.data(), dy.data(), x.data(), c.N, c.D, 1e-5f);
      check_close("rms_normalize y", y.read(), y_ref, tolerance_of(dt));
      check_close("rms_normalize dx", dx.read(), dx_ref, tolerance_of(dt));
    }
}

TEST_CASE("cuda attention_temperature scales rows as the CPU backend does", "[gpu][llama4]") {
  MT_REQUIRE_GPU();
  struct Case {
    int64_t rows, seq, width;
    float floor_scale, attn_scale;
  };
  // The fixture's (floor 4, scale 0.5 over short rows) and Scout's (floor 8192, scale 0.1 past two floors).
  for (const Case c : {Case{3, 20, 32, 4.f, 0.5f}, Case{1, 16500, 40 * 128, 8192.f, 0.1f}})
    for (const DType dt : {DType::f32, DType::bf16}) {
      INFO("seq " << c.seq << " width " << c.width << " " << (dt == DType::f32 ? "float32" : "bfloat16"));
      auto be = mt::make_cuda_backend(dt, 0, mt::environment_switches());
      const int64_t T = c.rows * c.seq;
      const auto x = rounded_to(dt, random_floats(T * c.width, 3));
      BackendBuffer d_x(*be, x, dt);
      be->attention_temperature(d_x.get(), T, c.seq, c.width, c.floor_scale, c.attn_scale);
      std::vector<float> ref = x;
      cpu().attention_temperature(ref.data(), T, c.seq, c.width, c.floor_scale, c.attn_scale);
      // The same steps on both backends; CUDA's log1pf is within 1 ulp of the host's, and bf16 rounds once more.
      check_close("attention_temperature", d_x.read(), rounded_to(dt, ref), dt == DType::f32 ? 3e-7 : 8e-3);
    }
}

TEST_CASE("cuda moe_scale_rows (Llama 4's expert input) forward and backward match the CPU backend", "[gpu][llama4]") {
  MT_REQUIRE_GPU();
  struct Case {
    int64_t T, k, H;
  };
  for (const Case c : {Case{37, 1, 64}, Case{300, 2, 5120 / 40}, Case{1, 1, 16}})
    for (const DType dt : {DType::f32, DType::bf16}) {
      INFO("T " << c.T << " k " << c.k << " H " << c.H << " " << (dt == DType::f32 ? "float32" : "bfloat16"));
      auto be = mt::make_cuda_backend(dt, 0, mt::environment_switches());
      const int64_t R = c.T * c.k;
      std::vector<int32_t> source(static_cast<size_t>(R));
      std::iota(source.begin(), source.end(), 0);
      for (int64_t r = 0; r + 1 < R; r += 2) std::swap(source[r], source[R - 1 - r]);  // a permutation
      auto weights = random_floats(R, 4);
      for (float& w : weights) w = 1.f / (1.f + std::exp(-w));
      const auto x = rounded_to(dt, random_floats(c.T * c.H, 5));
      std::vector<float> xs(static_cast<size_t>(R * c.H));
      for (int64_t r = 0; r < R; ++r)
        std::copy_n(x.begin() + source[r] / c.k * c.H, c.H, xs.begin() + r * c.H);
      const auto dxs = rounded_to(dt, random_floats(R * c.H, 6));
      Ints d_source(*be, source);
      BackendBuffer d_w(*be, weights, DType::f32), d_x(*be, x, dt), d_xs(*be, xs, dt), d_dxs(*be, dxs, dt);
      BackendBuffer d_dw(*be, R, DType::f32);
      be->moe_scale_rows_forward(d_xs.get(), d_w.floats(), d_source.p, R, c.H);
      be->moe_scale_rows_backward(d_dxs.get(), d_dw.floats(), d_x.get(), d_w.floats(), d_source.p, R, c.k, c.H);
      std::vector<float> xs_ref = xs, dxs_ref = dxs, dw_ref(static_cast<size_t>(R));
      cpu().moe_scale_rows_forward(xs_ref.data(), weights.data(), source.data(), R, c.H);
      cpu().moe_scale_rows_backward(dxs_ref.data(), dw_ref.data(), x.data(), weights.data(), source.data(), R, c.k,
                                    c.H);
      check_close("moe_scale_rows xs", d_xs.read(), xs_ref, tolerance_of(dt));
      check_close("moe_scale_rows dxs", d_dxs.read(), dxs_ref, tolerance_of(dt));
      check_close("moe_scale_rows d_weights", d_dw.read(), dw_ref, tolerance_of(dt));
    }
}

TEST_CASE("cuda chunked attention (chunk ids as segments, window at the chunk) matches the CPU backend",
          "[gpu][llama4][attention]") {
  MT_REQUIRE_GPU();
  // Two rows: one example of 300 tokens; examples of 70, 150 and 60 packed (positions restart), 20 tokens padding.
  const int64_t batch = 2, seq = 300, heads = 8, kv_heads = 2, hd = 128, chunk = 64;
  std::vector<int32_t> positions, lens = {300, 280};
  for (int64_t t = 0; t < seq; ++t) positions.push_back(static_cast<int32_t>(t));
  for (const int64_t n : {70, 150, 60, 20})
    for (int64_t p = 0; p < n; ++p) positions.push_back(static_cast<int32_t>(p));
  const std::vector<int32_t> ids = mt::chunk_segment_ids(positions, seq, chunk);
  REQUIRE(!ids.empty());
  const int64_t T = batch * seq, q_size = T * heads * hd, kv_size = T * kv_heads * hd;
  for (const DType dt : {DType::f32, DType::bf16}) {
    INFO((dt == DType::f32 ? "float32" : "bfloat16"));
    auto be = mt::make_cuda_backend(dt, 0, mt::environment_switches());
    const auto q = rounded_to(dt, random_floats(q_size, 7)), k = rounded_to(dt, random_floats(kv_size, 8));
    const auto v = rounded_to(dt, random_floats(kv_size, 9)), dout = rounded_to(dt, random_floats(q_size, 10));
    mt::AttnShape host{.batch = batch, .seq = seq, .n_heads = heads, .n_kv_heads = kv_heads, .head_dim = hd,
                       .window = chunk};
    host.seq_lens = lens.data();
    host.segments = ids.data();
    std::vector<float> out_ref(q_size), lse_ref(batch * heads * seq), dq_ref(q_size), dk_ref(kv_size), dv_ref(kv_size);
    cpu().attention_forward(out_ref.data(), lse_ref.data(), q.data(), k.data(), v.data(), host);
    cpu().attention_backward(dq_ref.data(), dk_ref.data(), dv_ref.data(), dout.data(), q.data(), k.data(), v.data(),
                             out_ref.data(), lse_ref.data(), host);
    Ints d_lens(*be, lens), d_ids(*be, ids);
    mt::AttnShape dev = host;
    dev.seq_lens = d_lens.p;
    dev.segments = d_ids.p;
    BackendBuffer d_q(*be, q, dt), d_k(*be, k, dt), d_v(*be, v, dt), d_dout(*be, dout, dt);
    BackendBuffer out(*be, q_size, dt), lse(*be, batch * heads * seq, DType::f32), dq(*be, q_size, dt);
    BackendBuffer dk(*be, kv_size, dt), dv(*be, kv_size, dt);
    be->attention_forward(out.get(), lse.floats(), d_q.get(), d_k.get(), d_v.get(), dev);
    be->attention_backward(dq.get(), dk.get(), dv.get(), d_dout.get(), d_q.get(), d_k.get(), d_v.get(), out.get(),
                           lse.floats(), dev);
    check_close("chunked attention out", out.read(), out_ref, tolerance_of(dt));
    check_close("chunked attention lse", lse.read(), lse_ref, 1e-5);
    check_close("chunked attention dq", dq.read(), dq_ref, tolerance_of(dt));
    check_close("chunked attention dk", dk.read(), dk_ref, tolerance_of(dt));
    check_close("chunked attention dv", dv.read(), dv_ref, tolerance_of(dt));
  }
}
