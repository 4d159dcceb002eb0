// CUTLASS's Hopper grouped GEMM of the experts (kernels/runtime/cutlass_grouped_gemm.h) against the CPU backend, bf16:
// called directly at DeepSeek-V3's expert shape (256 experts, 7168 -> 2048; each launch must be taken, not refused,
// and its workspace stay within the plan's figure), and through the Backend interface in the cutlass mode and the
// loop, which must agree with each other and with the CPU backend. Row counts: a few rows per expert, a fifth of the
// experts empty, and one expert holding half of all the rows.
// Invariant: where the GPU is not compute capability 9.0 the direct cases note it and return.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "backend/expert_gemm_problems.h"
#include "gpu/gpu_test_util.h"
#include "kernels/runtime/cuda_backend.h"
#include "kernels/runtime/cutlass_grouped_gemm.h"
#include "plan/gemm_workspace.h"

namespace {

using namespace mt::test;
using mt::DType;
using mt::ExpertGemm;
using bf16 = __nv_bfloat16;

// Rows per expert: 0 to 3 ((7e mod 5) − 1, at least 0: a fifth of the experts empty), and expert `heavy` holding as
// many rows as all the others together.
std::vector<int64_t> few_rows_one_heavy(int64_t E, int64_t heavy) {
  std::vector<int64_t> rows(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) rows[static_cast<size_t>(e)] = std::max<int64_t>(e * 7 % 5 - 1, 0);
  rows[static_cast<size_t>(heavy)] = 0;
  rows[static_cast<size_t>(heavy)] = std::accumulate(rows.begin(), rows.end(), int64_t{0});
  return rows;
}

std::vector<int64_t> offsets_of(const std::vector<int64_t>& rows) {
  std::vector<int64_t> o(rows.size() + 1, 0);
  std::partial_sum(rows.begin(), rows.end(), o.begin() + 1);
  return o;
}

uint64_t address(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

// Whether this GPU runs the CUTLASS kernels; where not, the case says why and returns.
#define MT_REQUIRE_CUTLASS_GPU()                                                              \
  do {                                                                                        \
    MT_REQUIRE_GPU();                                                                         \
    const std::string why_not = mt::cuda::CutlassGroupedGemm::unsupported_device();          \
    if (!why_not.empty()) {                                                                   \
      WARN("CUTLASS grouped GEMM case skipped: " << why_not);                                 \
      return;                                                                                 \
    }                                                                                         \
  } while (0)

}  // namespace

TEST_CASE("CUTLASS grouped GEMM at DeepSeek-V3's expert shape (256 experts, 7168 -> 2048), a few rows each and one "
          "expert holding half, takes every launch and matches the CPU backend", "[gpu][moe]") {
  MT_REQUIRE_CUTLASS_GPU();
  const int64_t E = 256, I = 7168, O = 2048;
  const std::vector<int64_t> rows = few_rows_one_heavy(E, 37);
  const std::vector<int64_t> offsets = offsets_of(rows);
  const int64_t R = offsets.back();
  const auto experts_with_rows = std::count_if(rows.begin(), rows.end(), [](int64_t r) { return r > 0; });
  mt::cuda::CutlassGroupedGemm cutlass(test_stream());
  // One launch of GEMM g, which CUTLASS must take; outputs O columns wide (forward) or the given o.
  const auto launch = [&](ExpertGemm g, const void* out, const void* a, const void* b, int64_t w_stride, int64_t o,
                          float beta) {
    const mt::ExpertGemmProblems p =
        mt::expert_gemm_problems(g, address(out), address(a), address(b), w_stride, offsets.data(), E, I, o);
    INFO(mt::expert_gemm_name(g));
    REQUIRE(p.unsupported.empty());
    CHECK(static_cast<int64_t>(p.problems.size()) == experts_with_rows);
    REQUIRE(cutlass.run(g, p.problems, beta).empty());
    mt::test::sync();
  };
  // Forward and backward data: one weight for every expert (w_stride 0), so that 256 experts of [2048, 7168] fit;
  // the problem lists still name each expert with rows.
  const auto w = rounded<bf16>(random_floats(O * I, 81, 0.05f));
  const auto x = rounded<bf16>(random_floats(R * I, 82));
  const auto dy = rounded<bf16>(random_floats(R * O, 83));
  const auto dx0 = rounded<bf16>(random_floats(R * I, 84));
  const auto d_w = upload<bf16>(w), d_x = upload<bf16>(x), d_dy = upload<bf16>(dy);
  DeviceBuffer<bf16> y(static_cast<size_t>(R * O));
  launch(ExpertGemm::forward, y.get(), d_x->get(), d_w->get(), 0, O, 0.0f);
  std::vector<float> y_ref(static_cast<size_t>(R * O));
  cpu().grouped_linear_forward(y_ref.data(), x.data(), w.data(), 0, offsets.data(), E, I, O);
  check_close("forward", download(y), y_ref, tolerance<bf16>);
  for (const float beta : {0.0f, 1.0f}) {
    INFO("backward data, beta " << beta);
    const auto dx = upload<bf16>(dx0);
    launch(ExpertGemm::backward_data, dx->get(), d_dy->get(), d_w->get(), 0, O, beta);
    std::vector<float> dx_ref = dx0, dw_scratch(static_cast<size_t>(O * I));  // every expert's dw in one: unused
    cpu().grouped_linear_backward(dx_ref.data(), dw_scratch.data(), dy.data(), x.data(), w.data(), 0, offsets.data(),
                                  E, I, O, beta == 1.0f);
    check_close("backward data", download(*dx), dx_ref, tolerance<bf16>);
  }
  // Backward weight: each expert its own fp32 dw_e (accumulated), 64 rows of 7168 so that 256 of them take 470 MB.
  const int64_t Ow = 64;
  const auto dyw = rounded<bf16>(random_floats(R * Ow, 85));
  const auto dw0 = random_floats(E * Ow * I, 86);
  const auto d_dyw = upload<bf16>(dyw);
  const auto dw = upload<float>(dw0);
  launch(ExpertGemm::backward_weight, dw->get(), d_dyw->get(), d_x->get(), Ow * I, Ow, 1.0f);
  std::vector<float> dw_ref = dw0;
  for (int64_t e = 0; e < E; ++e)
    for (int64_t r = offsets[e]; r < offsets[e + 1]; ++r)
      for (int64_t o = 0; o < Ow; ++o) {
        const float g = dyw[r * Ow + o];
        float* row = dw_ref.data() + (e * Ow + o) * I;
        const float* xr = x.data() + r * I;
        for (int64_t i = 0; i < I; ++i) row[i] += g * xr[i];
      }
  const std::vector<float> dw_got = download(*dw);
  check_close("backward weight (+=)", dw_got, dw_ref, 1e-4);
  for (int64_t e = 0; e < E; ++e)  // an expert without rows keeps its gradient, bit for bit
    if (rows[static_cast<size_t>(e)] == 0)
      CHECK(std::equal(dw_got.begin() + e * Ow * I, dw_got.begin() + (e + 1) * Ow * I, dw0.begin() + e * Ow * I));
  // No launch needed more workspace than plan/gemm_workspace.h counts (it grows past that only on demand).
  CHECK(cutlass.workspace_bytes() == mt::kCutlassGemmWorkspaceBytes);
}

TEST_CASE("cuda grouped expert GEMMs, cutlass and loop modes, agree with each other and with the CPU backend "
          "through the Backend interface (bf16, one expert holding half the rows)", "[gpu][moe]") {
  MT_REQUIRE_GPU();
  struct Layer {
    const char* name;
    int64_t E, I, O;
  };
  const Layer layers[] = {{"256 experts, 7168 -> 64", 256, 7168, 64},
                          {"128 experts, 2048 -> 384", 128, 2048, 384},
                          {"128 experts, 384 -> 2048 (a down projection)", 128, 384, 2048}};
  for (const Layer& l : layers) {
    INFO(l.name);
    const std::vector<int64_t> rows = few_rows_one_heavy(l.E, l.E / 3);
    const std::vector<int64_t> offsets = offsets_of(rows);
    const int64_t R = offsets.back(), stride = l.O * l.I;
    const auto w = rounded<bf16>(random_floats(l.E * stride, 91, 0.05f));
    const auto x = rounded<bf16>(random_floats(R * l.I, 92));
    const auto dy = rounded<bf16>(random_floats(R * l.O, 93));
    const auto dx0 = rounded<bf16>(random_floats(R * l.I, 94));
    const auto dw0 = random_floats(l.E * stride, 95);
    std::vector<float> y_ref(static_cast<size_t>(R * l.O)), dx_ref = dx0, dw_ref = dw0;
    cpu().grouped_linear_forward(y_ref.data(), x.data(), w.data(), stride, offsets.data(), l.E, l.I, l.O);
    cpu().grouped_linear_backward(dx_ref.data(), dw_ref.data(), dy.data(), x.data(), w.data(), stride, offsets.data(),
                                  l.E, l.I, l.O, true);
    std::vector<std::vector<float>> outputs[2];  // [loop, cutlass]: y, dx, dw
    for (int m = 0; m < 2; ++m) {
      const char* mode = m == 0 ? "loop" : "cutlass";
      INFO(mode);
      setenv("MEGATRAIN_MOE_GEMM", mode, 1);
      auto be = mt::make_cuda_backend(DType::bf16, 0, mt::environment_switches());
      unsetenv("MEGATRAIN_MOE_GEMM");
      BackendBuffer d_w(*be, w, DType::bf16), d_x(*be, x, DType::bf16), d_dy(*be, dy, DType::bf16),
          y(*be, R * l.O, DType::bf16), dx(*be, dx0, DType::bf16), dw(*be, dw0, DType::f32);
      be->grouped_linear_forward(y.get(), d_x.get(), d_w.get(), stride, offsets.data(), l.E, l.I, l.O);
      be->grouped_linear_backward(dx.get(), dw.floats(), d_dy.get(), d_x.get(), d_w.get(), stride, offsets.data(), l.E,
                                  l.I, l.O, true);
      outputs[m] = {y.read(), dx.read(), dw.read()};
      check_close("forward", outputs[m][0], y_ref, tolerance<bf16>);
      check_close("dx (+=)", outputs[m][1], dx_ref, tolerance<bf16>);
      check_close("dw (+=)", outputs[m][2], dw_ref, 1e-4);
    }
    check_close("forward, cutlass against the loop", outputs[1][0], outputs[0][0], tolerance<bf16>);
    check_close("dx, cutlass against the loop", outputs[1][1], outputs[0][1], tolerance<bf16>);
    check_close("dw, cutlass against the loop", outputs[1][2], outputs[0][2], 1e-4);
  }
}
