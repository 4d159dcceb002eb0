// The CUDA backend's mixture-of-experts ops against the CPU reference, through the Backend interface, in fp32 and
// bf16: the softmax top-k router (forward, backward with the load-balancing term and padding), its statistics, the
// stable permutation (bit for bit, an expert without rows included), gather / combine and their backwards (the
// combine's weights from the down projection's data gradient, with and without down biases), the grouped expert
// GEMMs forward and backward in every mode (MEGATRAIN_MOE_GEMM=loop, grouped and cutlass; cutlass over weights whose
// experts are 16-byte aligned, which it takes, and misaligned ones, which fall back to the loop), with row counts
// that change from call to call (the plans of power-of-two row buckets) and over 1 or 4 expert streams, over empty,
// single-row and imbalanced expert groups (every row in one expert, half the rows in one), the sigmoid gate.
#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <string>

#include "backend/backend.h"
#include "kernels/runtime/cuda_backend.h"
#include "gpu/gpu_test_util.h"

namespace {

using namespace mt::test;
using mt::DType;

struct Shape {
  const char* name;
  int64_t T, E, k, H, I;
  bool norm;
};
const std::vector<Shape> shapes = {
    {"Mixtral-like 8 experts top 2 renormalised", 37, 8, 2, 64, 48, true},
    {"Qwen3-MoE-like 128 experts top 8", 300, 128, 8, 128, 32, false},
    {"one token", 1, 4, 2, 16, 8, true},
    {"Qwen2-MoE-like 60 experts top 4 (two experts a lane, the last lanes short)", 70, 60, 4, 64, 16, false},
    {"256 experts top 8 renormalised (eight a lane)", 40, 256, 8, 32, 16, true},
    {"hidden 36 (bf16 rows of gather and combine a column at a time)", 23, 8, 2, 36, 12, true},
};

mt::MoeRouting softmax_router(const Shape& c) {
  mt::MoeRouting r;
  r.experts = c.E;
  r.top_k = c.k;
  r.norm_topk = c.norm;
  return r;
}

// Router logits with expert E−1 never chosen (a very low logit): an expert without rows.
std::vector<float> router_logits(const Shape& c, uint32_t seed) {
  auto l = random_floats(c.T * c.E, seed, 2.f);
  for (int64_t t = 0; t < c.T; ++t) l[t * c.E + c.E - 1] = -30.f;
  return l;
}

}  // namespace

TEST_CASE("cuda MoE router, statistics and permutation match the CPU backend", "[gpu][moe]") {
  MT_REQUIRE_GPU();
  for (const Shape& c : shapes)
    for (const DType dt : {DType::f32, DType::bf16}) {
      INFO(c.name << " " << (dt == DType::f32 ? "float32" : "bfloat16"));
      auto be = mt::make_cuda_backend(dt, 0, mt::environment_switches());
      const double tol = tolerance_of(dt);
      const auto logits = rounded_to(dt, router_logits(c, 1));
      const int64_t R = c.T * c.k;
      // Forward.
      BackendBuffer d_logits(*be, logits, dt), probs(*be, c.T * c.E, DType::f32), weights(*be, R, DType::f32);
      Ints idx(*be, R);
      be->moe_route_forward(probs.floats(), idx.p, weights.floats(), d_logits.get(), c.T, softmax_router(c));
      std::vector<float> probs_ref(c.T * c.E), weights_ref(R);
      std::vector<int32_t> idx_ref(R);
      cpu().moe_route_forward(probs_ref.data(), idx_ref.data(), weights_ref.data(), logits.data(), c.T, softmax_router(c));
      check_close("router probs", probs.read(), probs_ref, 1e-5);
      CHECK(idx.read() == idx_ref);
      check_close("router weights", weights.read(), weights_ref, 1e-5);
      // Backward with the aux term and padding (2 sequences, the second shorter).
      const int64_t seq = (c.T + 1) / 2;
      const std::vector<int32_t> lens = {static_cast<int32_t>(std::min(seq, c.T)), static_cast<int32_t>(std::max<int64_t>(c.T - seq - 1, 0))};
      const auto dw = random_floats(R, 2), aux = random_floats(c.E, 3, 0.1f);
      BackendBuffer d_dw(*be, dw, DType::f32), d_aux(*be, aux, DType::f32), dlog(*be, c.T * c.E, dt);
      Ints d_lens(*be, lens);
      be->moe_route_backward(dlog.get(), d_dw.floats(), probs.floats(), idx.p, weights.floats(), d_aux.floats(),
                             d_lens.p, seq, c.T, softmax_router(c));
      std::vector<float> dlog_ref(c.T * c.E);
      cpu().moe_route_backward(dlog_ref.data(), dw.data(), probs_ref.data(), idx_ref.data(), weights_ref.data(),
                               aux.data(), lens.data(), seq, c.T, softmax_router(c));
      check_close("router d_logits", dlog.read(), dlog_ref, tol);
      // Statistics over the valid tokens (accumulating).
      BackendBuffer sums(*be, std::vector<float>(c.E, 1.f), DType::f32);
      Ints counts(*be, std::vector<int32_t>(c.E, 5));
      be->moe_router_stats(counts.p, sums.floats(), probs.floats(), idx.p, d_lens.p, seq, c.T, c.E, c.k);
      std::vector<float> sums_ref(c.E, 1.f);
      std::vector<int32_t> counts_ref(c.E, 5);
      cpu().moe_router_stats(counts_ref.data(), sums_ref.data(), probs_ref.data(), idx_ref.data(), lens.data(), seq, c.T,
                             c.E, c.k);
      CHECK(counts.read() == counts_ref);
      check_close("router prob sums", sums.read(), sums_ref, 1e-5);
      // Permutation: bit for bit, expert E−1 without rows.
      Ints offsets(*be, c.E + 1), source(*be, R), row_of(*be, R);
      be->moe_permute(offsets.p, source.p, row_of.p, idx.p, c.T, c.E, c.k);
      std::vector<int32_t> offsets_ref(c.E + 1), source_ref(R), row_of_ref(R);
      cpu().moe_permute(offsets_ref.data(), source_ref.data(), row_of_ref.data(), idx_ref.data(), c.T, c.E, c.k);
      CHECK(offsets.read() == offsets_ref);
      CHECK(source.read() == source_ref);
      CHECK(row_of.read() == row_of_ref);
      CHECK(offsets_ref[c.E] == offsets_ref[c.E - 1]);
    }
}

TEST_CASE("cuda MoE sigmoid router (GLM-4.5: score bias, group-limited top k, scaling) matches the CPU backend",
          "[gpu][moe]") {
  MT_REQUIRE_GPU();
  const int64_t T = 50, E = 16, k = 3;
  for (const DType dt : {DType::f32, DType::bf16}) {
    INFO((dt == DType::f32 ? "float32" : "bfloat16"));
    auto be = mt::make_cuda_backend(dt, 0, mt::environment_switches());
    const auto logits = rounded_to(dt, random_floats(T * E, 21, 2.f));
    const auto bias = rounded_to(dt, random_floats(E, 22, 0.3f));
    BackendBuffer d_logits(*be, logits, dt), d_bias(*be, bias, dt);
    mt::MoeRouting r;
    r.experts = E, r.top_k = k, r.sigmoid = true, r.norm_topk = true, r.scaling = 2.5f, r.groups = 4, r.topk_groups = 2;
    mt::MoeRouting r_cpu = r;
    r.score_bias = d_bias.get();
    r_cpu.score_bias = bias.data();
    BackendBuffer probs(*be, T * E, DType::f32), weights(*be, T * k, DType::f32), dlog(*be, T * E, dt);
    Ints idx(*be, T * k);
    be->moe_route_forward(probs.floats(), idx.p, weights.floats(), d_logits.get(), T, r);
    std::vector<float> probs_ref(T * E), weights_ref(T * k), dlog_ref(T * E);
    std::vector<int32_t> idx_ref(T * k);
    cpu().moe_route_forward(probs_ref.data(), idx_ref.data(), weights_ref.data(), logits.data(), T, r_cpu);
    check_close("sigmoid probs", probs.read(), probs_ref, 1e-5);
    CHECK(idx.read() == idx_ref);
    check_close("sigmoid weights", weights.read(), weights_ref, 1e-5);
    const auto dw = random_floats(T * k, 23);
    BackendBuffer d_dw(*be, dw, DType::f32);
    be->moe_route_backward(dlog.get(), d_dw.floats(), probs.floats(), idx.p, weights.floats(), nullptr, nullptr, T, T, r);
    cpu().moe_route_backward(dlog_ref.data(), dw.data(), probs_ref.data(), idx_ref.data(), weights_ref.data(), nullptr,
                             nullptr, T, T, r_cpu);
    check_close("sigmoid d_logits", dlog.read(), dlog_ref, tolerance_of(dt));
  }
}

TEST_CASE("cuda MoE gather, combine, grouped expert GEMMs (loop, grouped and cutlass) and sigmoid gate match the CPU "
          "backend", "[gpu][moe]") {
  MT_REQUIRE_GPU();
  for (const char* mode : {"loop", "grouped", "cutlass"})
    for (const Shape& c : shapes)
      for (const DType dt : {DType::f32, DType::bf16}) {
        INFO(mode << " " << c.name << " " << (dt == DType::f32 ? "float32" : "bfloat16"));
        setenv("MEGATRAIN_MOE_GEMM", mode, 1);
        auto be = mt::make_cuda_backend(dt, 0, mt::environment_switches());
        unsetenv("MEGATRAIN_MOE_GEMM");
        const double tol = tolerance_of(dt);
        const int64_t R = c.T * c.k;
        std::vector<float> probs(c.T * c.E), weights(R);
        std::vector<int32_t> idx(R), offsets(c.E + 1), source(R), row_of(R);
        cpu().moe_route_forward(probs.data(), idx.data(), weights.data(), router_logits(c, 4).data(), c.T, softmax_router(c));
        cpu().moe_permute(offsets.data(), source.data(), row_of.data(), idx.data(), c.T, c.E, c.k);
        const std::vector<int64_t> host_offsets(offsets.begin(), offsets.end());
        Ints d_source(*be, source), d_row_of(*be, row_of);
        BackendBuffer d_weights(*be, weights, DType::f32);
        // Gather and its backward.
        const auto x = rounded_to(dt, random_floats(c.T * c.H, 5));
        BackendBuffer d_x(*be, x, dt), xs(*be, R * c.H, dt);
        be->moe_gather(xs.get(), d_x.get(), d_source.p, R, c.k, c.H);
        std::vector<float> xs_ref(R * c.H);
        cpu().moe_gather(xs_ref.data(), x.data(), source.data(), R, c.k, c.H);
        CHECK(xs.read() == xs_ref);
        const auto dxs = rounded_to(dt, random_floats(R * c.H, 6));
        BackendBuffer d_dxs(*be, dxs, dt), dx(*be, c.T * c.H, dt);
        be->moe_gather_backward(dx.get(), d_dxs.get(), d_row_of.p, c.T, c.k, c.H, false);
        std::vector<float> dx_ref(c.T * c.H);
        cpu().moe_gather_backward(dx_ref.data(), dxs.data(), row_of.data(), c.T, c.k, c.H, false);
        check_close("gather backward", dx.read(), dx_ref, tol);
        // Grouped expert GEMMs: gate [I, H] per expert, stride I·H + 7 (experts are not packed back to back), or
        // I·H + 8 in cutlass mode (each expert 16-byte aligned, so CUTLASS takes the shapes whose H and I are
        // multiples of 8).
        const int64_t stride = c.I * c.H + (std::string(mode) == "cutlass" ? 8 : 7);
        const auto w = rounded_to(dt, random_floats(c.E * stride, 7, 0.1f));
        BackendBuffer d_w(*be, w, dt), y(*be, R * c.I, dt);
        be->grouped_linear_forward(y.get(), xs.get(), d_w.get(), stride, host_offsets.data(), c.E, c.H, c.I);
        std::vector<float> y_ref(R * c.I);
        cpu().grouped_linear_forward(y_ref.data(), xs_ref.data(), w.data(), stride, host_offsets.data(), c.E, c.H, c.I);
        check_close("grouped GEMM forward", y.read(), y_ref, tol);
        const auto dy = rounded_to(dt, random_floats(R * c.I, 8));
        const auto dw0 = random_floats(c.E * stride, 9);
        BackendBuffer d_dy(*be, dy, dt), gdx(*be, dxs, dt), gdw(*be, dw0, DType::f32);
        be->grouped_linear_backward(gdx.get(), gdw.floats(), d_dy.get(), xs.get(), d_w.get(), stride,
                                    host_offsets.data(), c.E, c.H, c.I, true);
        std::vector<float> gdx_ref = dxs, gdw_ref = dw0;
        cpu().grouped_linear_backward(gdx_ref.data(), gdw_ref.data(), dy.data(), xs_ref.data(), w.data(), stride,
                                      host_offsets.data(), c.E, c.H, c.I, true);
        check_close("grouped GEMM dx (+=)", gdx.read(), gdx_ref, tol);
        check_close("grouped GEMM dw (+=), the empty expert's untouched", gdw.read(), gdw_ref, tol);
        // Combine and its backward.
        const auto ys = rounded_to(dt, random_floats(R * c.H, 10));
        BackendBuffer d_ys(*be, ys, dt), out(*be, c.T * c.H, dt);
        be->moe_combine_forward(out.get(), d_ys.get(), d_weights.floats(), d_row_of.p, c.T, c.k, c.H);
        std::vector<float> out_ref(c.T * c.H);
        cpu().moe_combine_forward(out_ref.data(), ys.data(), weights.data(), row_of.data(), c.T, c.k, c.H);
        check_close("combine forward", out.read(), out_ref, tol);
        const auto dout = rounded_to(dt, random_floats(c.T * c.H, 11));
        BackendBuffer d_dout(*be, dout, dt);
        // The combine's weights backward from u = g·w_down and the activations (y above), with and without the
        // down projection's per-expert bias.
        const auto bias = rounded_to(dt, random_floats(c.E * c.H, 13));
        BackendBuffer d_bias(*be, bias, dt);
        Ints d_idx(*be, idx);
        for (const bool biased : {false, true}) {
          INFO((biased ? "with" : "without") << " down biases");
          BackendBuffer u(*be, dy, dt), dwts(*be, R, DType::f32);
          be->moe_combine_weights_backward(u.get(), dwts.floats(), y.get(), d_weights.floats(), d_source.p, d_idx.p,
                                           d_dout.get(), biased ? d_bias.get() : nullptr, R, c.k, c.I, c.H);
          std::vector<float> u_ref = dy, dwts_ref(R);
          cpu().moe_combine_weights_backward(u_ref.data(), dwts_ref.data(), y_ref.data(), weights.data(), source.data(),
                                             idx.data(), dout.data(), biased ? bias.data() : nullptr, R, c.k, c.I,
                                             c.H);
          check_close("combine weights backward d_act", u.read(), u_ref, tol);
          check_close("combine weights backward d_weights", dwts.read(), dwts_ref, tol);
        }
        // Sigmoid-gated add (Qwen2-MoE's shared expert).
        const auto g = rounded_to(dt, random_floats(c.T, 12));
        BackendBuffer d_g(*be, g, dt), gy(*be, dout, dt), gdx2(*be, c.T * c.H, dt), gdg(*be, c.T, dt);
        be->row_sigmoid_gate_forward(gy.get(), d_x.get(), d_g.get(), c.T, c.H);
        std::vector<float> gy_ref = dout, gdx2_ref(c.T * c.H), gdg_ref(c.T);
        cpu().row_sigmoid_gate_forward(gy_ref.data(), x.data(), g.data(), c.T, c.H);
        check_close("sigmoid gate forward", gy.read(), gy_ref, tol);
        be->row_sigmoid_gate_backward(gdx2.get(), gdg.get(), d_dout.get(), d_x.get(), d_g.get(), c.T, c.H);
        cpu().row_sigmoid_gate_backward(gdx2_ref.data(), gdg_ref.data(), dout.data(), x.data(), g.data(), c.T, c.H);
        check_close("sigmoid gate dx", gdx2.read(), gdx2_ref, tol);
        check_close("sigmoid gate dg", gdg.read(), gdg_ref, tol);
      }
}

namespace {

// Offsets of E experts holding rows[e] rows each.
std::vector<int64_t> offsets_of(const std::vector<int64_t>& rows) {
  std::vector<int64_t> o(rows.size() + 1, 0);
  std::partial_sum(rows.begin(), rows.end(), o.begin() + 1);
  return o;
}

}  // namespace

TEST_CASE("cuda grouped expert GEMMs: row counts that change call to call reuse their bucket's plan, and 1 or 4 "
          "expert streams give the same bits", "[gpu][moe]") {
  MT_REQUIRE_GPU();
  const int64_t E = 6, H = 96, I = 80;
  // Calls in this order: the second reuses the first's buckets at other sizes (65 -> 128 bucket, 100 in it too; 0
  // rows skipped), the third crosses into larger buckets, the fourth returns to smaller sizes of used buckets.
  const std::vector<std::vector<int64_t>> calls = {
      {65, 3, 0, 200, 17, 128}, {100, 1, 64, 129, 0, 90}, {513, 2, 1, 300, 1000, 64}, {70, 5, 33, 2, 129, 1}};
  for (const DType dt : {DType::f32, DType::bf16}) {
    std::vector<std::vector<float>> outputs[2];  // [streams 1, 4][call]: y, dx, dw
    for (int pass = 0; pass < 2; ++pass) {
      INFO((dt == DType::f32 ? "float32" : "bfloat16") << ", expert streams " << (pass == 0 ? 1 : 4));
      setenv("MEGATRAIN_MOE_GEMM_STREAMS", pass == 0 ? "1" : "4", 1);
      auto be = mt::make_cuda_backend(dt, 0, mt::environment_switches());
      unsetenv("MEGATRAIN_MOE_GEMM_STREAMS");
      const double tol = tolerance_of(dt);
      const int64_t stride = I * H + 5;
      const auto w = rounded_to(dt, random_floats(E * stride, 21, 0.1f));
      BackendBuffer d_w(*be, w, dt);
      for (size_t call = 0; call < calls.size(); ++call) {
        INFO("call " << call);
        const std::vector<int64_t> offsets = offsets_of(calls[call]);
        const int64_t R = offsets.back();
        const auto x = rounded_to(dt, random_floats(R * H, 22 + static_cast<int>(call)));
        const auto dy = rounded_to(dt, random_floats(R * I, 40 + static_cast<int>(call)));
        const auto dw0 = random_floats(E * stride, 60 + static_cast<int>(call));
        BackendBuffer d_x(*be, x, dt), y(*be, R * I, dt), d_dy(*be, dy, dt), dx(*be, R * H, dt),
            dw(*be, dw0, DType::f32);
        be->grouped_linear_forward(y.get(), d_x.get(), d_w.get(), stride, offsets.data(), E, H, I);
        be->grouped_linear_backward(dx.get(), dw.floats(), d_dy.get(), d_x.get(), d_w.get(), stride, offsets.data(),
                                    E, H, I, false);
        std::vector<float> y_ref(R * I), dx_ref(R * H), dw_ref = dw0;
        cpu().grouped_linear_forward(y_ref.data(), x.data(), w.data(), stride, offsets.data(), E, H, I);
        cpu().grouped_linear_backward(dx_ref.data(), dw_ref.data(), dy.data(), x.data(), w.data(), stride,
                                      offsets.data(), E, H, I, false);
        const auto yr = y.read(), dxr = dx.read(), dwr = dw.read();
        check_close("forward", yr, y_ref, tol);
        check_close("dx", dxr, dx_ref, tol);
        check_close("dw (+=)", dwr, dw_ref, tol);
        for (const auto* v : {&yr, &dxr, &dwr}) outputs[pass].push_back(*v);
      }
    }
    CHECK(outputs[0] == outputs[1]);
  }
}

TEST_CASE("cuda grouped expert GEMMs over empty, single-row and imbalanced expert groups match the CPU backend, "
          "loop, grouped and cutlass, experts 16-byte aligned or not", "[gpu][moe]") {
  MT_REQUIRE_GPU();
  const int64_t H = 72, I = 40;
  struct Groups {
    const char* name;
    std::vector<int64_t> rows;  // per expert
  };
  const std::vector<Groups> cases = {
      {"every row in one expert, the others empty", {0, 0, 0, 257, 0, 0, 0, 0}},
      {"one row each", {1, 1, 1, 1, 1, 1, 1, 1}},
      {"a single row in one expert, the others empty", {0, 1, 0, 0, 0, 0, 0, 0}},
      {"half the rows to one expert, the rest spread and some empty", {300, 0, 90, 1, 0, 150, 59, 0}},
      {"imbalanced around the bucket edges", {64, 65, 127, 128, 129, 2, 0, 1}},
  };
  for (const char* mode : {"loop", "grouped", "cutlass"})
    for (const Groups& g : cases)
      for (const DType dt : {DType::f32, DType::bf16})
        for (const int64_t pad : {3, 8}) {  // the experts' weights 2- or 16-byte aligned
          INFO(mode << " " << g.name << " " << (dt == DType::f32 ? "float32" : "bfloat16") << ", stride I·H + "
                    << pad);
          setenv("MEGATRAIN_MOE_GEMM", mode, 1);
          auto be = mt::make_cuda_backend(dt, 0, mt::environment_switches());
          unsetenv("MEGATRAIN_MOE_GEMM");
          const double tol = tolerance_of(dt);
          const auto E = static_cast<int64_t>(g.rows.size());
          const std::vector<int64_t> offsets = offsets_of(g.rows);
          const int64_t R = offsets.back(), stride = I * H + pad;
          const auto w = rounded_to(dt, random_floats(E * stride, 71, 0.1f));
          const auto x = rounded_to(dt, random_floats(R * H, 72));
          const auto dy = rounded_to(dt, random_floats(R * I, 73));
          const auto dx0 = rounded_to(dt, random_floats(R * H, 74));
          const auto dw0 = random_floats(E * stride, 75);
          BackendBuffer d_w(*be, w, dt), d_x(*be, x, dt), y(*be, R * I, dt), d_dy(*be, dy, dt);
          be->grouped_linear_forward(y.get(), d_x.get(), d_w.get(), stride, offsets.data(), E, H, I);
          std::vector<float> y_ref(R * I);
          cpu().grouped_linear_forward(y_ref.data(), x.data(), w.data(), stride, offsets.data(), E, H, I);
          check_close("forward", y.read(), y_ref, tol);
          for (const bool accumulate : {false, true}) {
            INFO("dx " << (accumulate ? "+=" : "="));
            BackendBuffer dx(*be, dx0, dt), dw(*be, dw0, DType::f32);
            be->grouped_linear_backward(dx.get(), dw.floats(), d_dy.get(), d_x.get(), d_w.get(), stride,
                                        offsets.data(), E, H, I, accumulate);
            std::vector<float> dx_ref = dx0, dw_ref = dw0;
            cpu().grouped_linear_backward(dx_ref.data(), dw_ref.data(), dy.data(), x.data(), w.data(), stride,
                                          offsets.data(), E, H, I, accumulate);
            check_close("dx", dx.read(), dx_ref, tol);
            const auto dwr = dw.read();
            check_close("dw (+=)", dwr, dw_ref, tol);
            for (int64_t e = 0; e < E; ++e)  // an empty expert's gradient is untouched, bit for bit
              if (g.rows[static_cast<size_t>(e)] == 0)
                CHECK(std::equal(dwr.begin() + e * stride, dwr.begin() + (e + 1) * stride,
                                 dw0.begin() + e * stride));
          }
        }
}
