// The CUDA backend's Gated DeltaNet and gated-attention ops against the CPU backend, through the Backend interface:
// the sigmoid output gate, the causal conv1d + SiLU (packed segments), the DeltaNet gates, the gated delta rule
// (the chunked kernel and, for head dims past 128, the recurrent one, against the recurrent CPU reference; lengths 1
// to 4096, within, at and past chunk ends, GQA head groups (Qwen3.5's 3 v heads per k head among them), partial
// column tiles, head dims that are not multiples of 8 (the kernels' element-wise tile copies), padding and packed
// segments, some starting a chunk) and the gated RMSNorm, forward and backward, fp32 and bf16 (bf16 inputs rounded
// first).
// Tolerances ‖out − ref‖/‖ref‖: 1e-5 (fp32; 1e-4 for the delta rule's backward, whose sums run in another order
// over hundreds of tokens) and 2e-2 (bf16 storage; the chunked kernel's tensor-core operands are bf16 too).
#include <cmath>
#include <string>

#include "backend/backend.h"
#include "kernels/runtime/cuda_backend.h"
#include "gpu/gpu_test_util.h"

namespace {

using namespace mt::test;
using mt::DType;

const char* dtype_label_of(DType dt) { return dt == DType::f32 ? "float32" : "bfloat16"; }
bool is_f32_dtype(DType dt) { return dt == DType::f32; }

std::vector<float> decays(int64_t n, uint32_t seed) {
  auto g = random_floats(n, seed);
  for (float& x : g) x = -0.02f - 0.3f * std::abs(x);
  return g;
}
std::vector<float> betas(int64_t n, uint32_t seed) {
  auto b = random_floats(n, seed);
  for (float& x : b) x = 1.f / (1.f + std::exp(-x));
  return b;
}

}  // namespace

TEST_CASE("cuda backend sigmoid gate, causal conv1d, deltanet gates and gated rmsnorm match the CPU backend",
          "[gpu][deltanet]") {
  MT_REQUIRE_GPU();
  for (const DType dt : {DType::f32, DType::bf16}) {
    DYNAMIC_SECTION("deltanet elementwise " << dtype_label_of(dt)) {
      auto be = mt::make_cuda_backend(dt, 0, mt::environment_switches());
      const double tol = tolerance_of(dt);
      {  // sigmoid gate, dx aliasing dy
        const int64_t n = 5003;
        const auto x = rounded_to(dt, random_floats(n, 1)), gate = rounded_to(dt, random_floats(n, 2, 3.f));
        const auto dy = rounded_to(dt, random_floats(n, 3));
        BackendBuffer d_x(*be, x, dt), d_gate(*be, gate, dt), y(*be, n, dt), d_dy(*be, dy, dt), dgate(*be, n, dt);
        be->sigmoid_gate_forward(y.get(), d_x.get(), d_gate.get(), n);
        be->sigmoid_gate_backward(d_dy.get(), dgate.get(), d_dy.get(), d_x.get(), d_gate.get(), n);
        std::vector<float> y_ref(n), dx_ref = dy, dgate_ref(n);
        cpu().sigmoid_gate_forward(y_ref.data(), x.data(), gate.data(), n);
        cpu().sigmoid_gate_backward(dx_ref.data(), dgate_ref.data(), dx_ref.data(), x.data(), gate.data(), n);
        check_close("sigmoid gate y", y.read(), y_ref, tol);
        check_close("sigmoid gate dx", d_dy.read(), dx_ref, tol);
        check_close("sigmoid gate dgate", dgate.read(), dgate_ref, tol);
      }
      {  // causal conv1d over packed segments
        const int64_t batch = 2, seq = 150, C = 96, K = 4, T = batch * seq;
        std::vector<int32_t> segments(T);
        for (int64_t t = 0; t < T; ++t) segments[t] = static_cast<int32_t>(t < seq ? (t < 37 ? 0 : 1) : 2);
        const auto x = rounded_to(dt, random_floats(T * C, 4)), w = rounded_to(dt, random_floats(C * K, 5, 0.5f));
        const auto dy = rounded_to(dt, random_floats(T * C, 6)), dw0 = random_floats(C * K, 7);
        BackendBuffer d_x(*be, x, dt), d_w(*be, w, dt), d_dy(*be, dy, dt), y(*be, T * C, dt), dx(*be, T * C, dt);
        BackendBuffer dw(*be, dw0, DType::f32);
        const Ints d_seg(*be, segments);
        be->causal_conv1d_forward(y.get(), d_x.get(), d_w.get(), batch, seq, C, K, d_seg.p);
        be->causal_conv1d_backward(dx.get(), dw.floats(), d_dy.get(), d_x.get(), d_w.get(), batch, seq, C, K, d_seg.p);
        std::vector<float> y_ref(T * C), dx_ref(T * C), dw_ref = dw0;
        cpu().causal_conv1d_forward(y_ref.data(), x.data(), w.data(), batch, seq, C, K, segments.data());
        cpu().causal_conv1d_backward(dx_ref.data(), dw_ref.data(), dy.data(), x.data(), w.data(), batch, seq, C, K,
                                     segments.data());
        check_close("conv1d y", y.read(), y_ref, tol);
        check_close("conv1d dx", dx.read(), dx_ref, tol);
        check_close("conv1d dw", dw.read(), dw_ref, is_f32_dtype(dt) ? 1e-5 : 2e-2);
      }
      {  // gates
        const int64_t T = 700, n = 48;
        auto ba = rounded_to(dt, random_floats(T * 2 * n, 8, 2.f));
        const auto a_log = rounded_to(dt, random_floats(n, 9)), dt_bias = rounded_to(dt, random_floats(n, 10));
        const auto dg = random_floats(T * n, 11), dbeta = random_floats(T * n, 12);
        const auto da0 = random_floats(n, 13), ddt0 = random_floats(n, 14);
        BackendBuffer d_ba(*be, ba, dt), d_alog(*be, a_log, dt), d_dtb(*be, dt_bias, dt), g(*be, T * n, DType::f32),
            beta(*be, T * n, DType::f32), d_dg(*be, dg, DType::f32), d_dbeta(*be, dbeta, DType::f32),
            dba(*be, T * 2 * n, dt), da(*be, da0, DType::f32), ddt(*be, ddt0, DType::f32);
        be->deltanet_gates_forward(g.floats(), beta.floats(), d_ba.get(), d_alog.get(), d_dtb.get(), T, n);
        be->deltanet_gates_backward(dba.get(), da.floats(), ddt.floats(), d_dg.floats(), d_dbeta.floats(), d_ba.get(),
                                    d_alog.get(), d_dtb.get(), T, n);
        std::vector<float> g_ref(T * n), beta_ref(T * n), dba_ref(T * 2 * n), da_ref = da0, ddt_ref = ddt0;
        cpu().deltanet_gates_forward(g_ref.data(), beta_ref.data(), ba.data(), a_log.data(), dt_bias.data(), T, n);
        cpu().deltanet_gates_backward(dba_ref.data(), da_ref.data(), ddt_ref.data(), dg.data(), dbeta.data(),
                                      ba.data(), a_log.data(), dt_bias.data(), T, n);
        check_close("gates g", g.read(), g_ref, 1e-5);
        check_close("gates beta", beta.read(), beta_ref, 1e-5);
        check_close("gates d_ba", dba.read(), dba_ref, tol);
        check_close("gates d_a_log", da.read(), da_ref, 1e-5);
        check_close("gates d_dt_bias", ddt.read(), ddt_ref, 1e-5);
      }
      {  // gated rmsnorm over v heads of 128
        const int64_t N = 333, D = 128;
        const auto x = rounded_to(dt, random_floats(N * D, 15)), z = rounded_to(dt, random_floats(N * D, 16, 2.f));
        const auto w = rounded_to(dt, random_floats(D, 17)), dy = rounded_to(dt, random_floats(N * D, 18));
        const auto dw0 = random_floats(D, 19);
        BackendBuffer d_x(*be, x, dt), d_z(*be, z, dt), d_w(*be, w, dt), d_dy(*be, dy, dt), y(*be, N * D, dt),
            dx(*be, N * D, dt), dz(*be, N * D, dt), dw(*be, dw0, DType::f32);
        be->gated_rmsnorm_forward(y.get(), d_x.get(), d_z.get(), d_w.get(), N, D, 1e-6f);
        be->gated_rmsnorm_backward(dx.get(), dz.get(), dw.floats(), d_dy.get(), d_x.get(), d_z.get(), d_w.get(), N, D,
                                   1e-6f);
        std::vector<float> y_ref(N * D), dx_ref(N * D), dz_ref(N * D), dw_ref = dw0;
        cpu().gated_rmsnorm_forward(y_ref.data(), x.data(), z.data(), w.data(), N, D, 1e-6f);
        cpu().gated_rmsnorm_backward(dx_ref.data(), dz_ref.data(), dw_ref.data(), dy.data(), x.data(), z.data(),
                                     w.data(), N, D, 1e-6f);
        check_close("gated rmsnorm y", y.read(), y_ref, tol);
        check_close("gated rmsnorm dx", dx.read(), dx_ref, tol);
        check_close("gated rmsnorm dz", dz.read(), dz_ref, tol);
        check_close("gated rmsnorm dw", dw.read(), dw_ref, is_f32_dtype(dt) ? 1e-5 : 2e-2);
      }
    }
  }
}

TEST_CASE("cuda backend gated delta rule matches the CPU recurrence (lengths, head groups, padding, segments)",
          "[gpu][deltanet]") {
  MT_REQUIRE_GPU();
  struct Row {
    const char* name;
    int64_t batch, seq, nk, nv, dk, dv;
    int64_t pad;      // the last sequence is this much shorter than seq
    int64_t segment;  // packed examples of this many tokens (over the flattened batch); 0 = none
  };
  // The chunked kernel (chunks of 64 for bf16, 32 for fp32) for head dims up to 128, the recurrent one beyond.
  for (const Row& r : {Row{"length 1, 1/1 heads x 128/128", 1, 1, 1, 1, 128, 128, 0, 0},
                      Row{"length 13, GQA 2/4 x 64/32, padded", 2, 13, 2, 4, 64, 32, 5, 0},
                      Row{"length 64 (one bf16 chunk), 1/2 heads x 128/128", 1, 64, 1, 2, 128, 128, 0, 0},
                      Row{"length 65, 1/1 x 32/48 (partial tiles), padded to 64, packed", 2, 65, 1, 1, 32, 48, 1, 30},
                      Row{"length 150, GQA 2/4 x 64/32, padded", 2, 150, 2, 4, 64, 32, 17, 0},
                      Row{"length 200, Qwen3.5 head dims 128, 1/3 heads, padded, packed", 2, 200, 1, 3, 128, 128, 17,
                          70},
                      Row{"length 1000, 1/3 x 128/128, three sequences, padded, packed", 3, 1000, 1, 3, 128, 128, 333,
                          256},
                      Row{"length 4096, 1/1 x 128/128", 1, 4096, 1, 1, 128, 128, 0, 0},
                      Row{"length 2100, Qwen3.5's head group 2/6 x 128/128, padded, packed", 2, 2100, 2, 6, 128, 128,
                          100, 500},
                      Row{"length 300, head dims 20/36 (element-wise tile copies), GQA 2/4, padded, packed", 2, 300, 2,
                          4, 20, 36, 33, 100},
                      Row{"head dims 256/192 (the recurrent kernel), padded, packed", 2, 90, 1, 2, 256, 192, 17, 40}}) {
    for (const DType dt : {DType::f32, DType::bf16}) {
      DYNAMIC_SECTION(r.name << " " << dtype_label_of(dt)) {
        auto be = mt::make_cuda_backend(dt, 0, mt::environment_switches());
        mt::DeltaRuleShape host{.batch = r.batch, .seq = r.seq, .n_k_heads = r.nk, .n_v_heads = r.nv,
                                .k_head_dim = r.dk, .v_head_dim = r.dv};
        const int64_t T = r.batch * r.seq, R = host.row(), V = host.value_dim();
        std::vector<int32_t> lens(r.batch, static_cast<int32_t>(r.seq));
        lens.back() = static_cast<int32_t>(r.seq - r.pad);
        std::vector<int32_t> segments(T);
        for (int64_t t = 0; t < T; ++t) segments[t] = static_cast<int32_t>(r.segment ? t / r.segment : 0);
        host.seq_lens = lens.data();
        host.segments = r.segment ? segments.data() : nullptr;
        const Ints d_lens(*be, lens), d_seg(*be, segments);
        mt::DeltaRuleShape dev = host;
        dev.seq_lens = d_lens.p;
        dev.segments = r.segment ? d_seg.p : nullptr;
        const auto qkv = rounded_to(dt, random_floats(T * R, 20)), d_o = rounded_to(dt, random_floats(T * V, 21));
        const auto g = decays(T * r.nv, 22), beta = betas(T * r.nv, 23);
        BackendBuffer d_qkv(*be, qkv, dt), d_do(*be, d_o, dt), d_g(*be, g, DType::f32), d_beta(*be, beta, DType::f32),
            o(*be, T * V, dt), dqkv(*be, T * R, dt), dg(*be, T * r.nv, DType::f32), dbeta(*be, T * r.nv, DType::f32);
        be->gated_delta_rule_forward(o.get(), d_qkv.get(), d_g.floats(), d_beta.floats(), dev);
        be->gated_delta_rule_backward(dqkv.get(), dg.floats(), dbeta.floats(), d_do.get(), d_qkv.get(), d_g.floats(),
                                      d_beta.floats(), dev);
        std::vector<float> o_ref(T * V), dqkv_ref(T * R), dg_ref(T * r.nv), dbeta_ref(T * r.nv);
        cpu().gated_delta_rule_forward(o_ref.data(), qkv.data(), g.data(), beta.data(), host);
        cpu().gated_delta_rule_backward(dqkv_ref.data(), dg_ref.data(), dbeta_ref.data(), d_o.data(), qkv.data(),
                                        g.data(), beta.data(), host);
        const bool f32 = is_f32_dtype(dt);
        check_close("delta rule o", o.read(), o_ref, f32 ? 1e-5 : 2e-2);
        check_close("delta rule d_qkv", dqkv.read(), dqkv_ref, f32 ? 1e-4 : 2e-2);
        check_close("delta rule dg", dg.read(), dg_ref, f32 ? 1e-4 : 2e-2);
        check_close("delta rule dbeta", dbeta.read(), dbeta_ref, f32 ? 1e-4 : 2e-2);
        // Deterministic: the same call gives the same bits.
        BackendBuffer dqkv2(*be, T * R, dt), dg2(*be, T * r.nv, DType::f32), dbeta2(*be, T * r.nv, DType::f32);
        be->gated_delta_rule_backward(dqkv2.get(), dg2.floats(), dbeta2.floats(), d_do.get(), d_qkv.get(),
                                      d_g.floats(), d_beta.floats(), dev);
        CHECK(same_bits(dqkv.read(), dqkv2.read()));
        CHECK(same_bits(dg.read(), dg2.read()));
      }
    }
  }
}
