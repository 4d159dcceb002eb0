// The expert GEMMs probe ("[.moe_gemm_bench]", hidden: run by name on a GPU machine): the three GEMMs of an MoE
// layer's projections (forward, backward data, backward weight; bf16, fp32 accumulation) through the loop of cuBLASLt
// GEMMs and through CUTLASS's grouped GEMM (kernels/runtime/grouped_gemm.h), at the shapes of Qwen3-30B-A3B (128
// experts, hidden 2048, expert 768, 32768 tokens top 8), GPT-OSS-120B (128 experts, 2880, top 4, 32768 tokens) and
// DeepSeek-V3 (256 experts, hidden 7168, expert 2048, top 8, 16384 tokens; and 32 of its experts over 4096 tokens,
// as bench runs its layers), with the rows spread evenly over the experts or half of them in one expert, against one
// dense cuBLASLt GEMM of the same FLOPs (all the rows against one expert's weight). One line per projection, spread, mode and GEMM: milliseconds, TFLOP/s and the ratio to the dense
// GEMM (issue #46's bar: 0.8).
// Invariant: every launch is on the test stream and timed by events around kTimedCalls calls after one untimed call.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "gpu/gpu_test_util.h"
#include "kernels/runtime/gemm.h"
#include "kernels/runtime/grouped_gemm.h"
#include "plan/gemm_workspace.h"

namespace {

using namespace mt::test;
using mt::DType;
using bf16 = __nv_bfloat16;

constexpr int kTimedCalls = 5;

struct Projection {
  const char* model;
  const char* name;
  int64_t E, I, O, rows;  // rows: tokens × top k
};

// Offsets of `rows` rows over E experts: evenly (the remainder one each to the first), or half in expert 0 and the
// rest evenly over the others.
std::vector<int64_t> spread(int64_t E, int64_t rows, bool one_holds_half) {
  std::vector<int64_t> counts(static_cast<size_t>(E), 0);
  const int64_t first = one_holds_half ? rows / 2 : 0, rest = rows - first, over = one_holds_half ? E - 1 : E;
  for (int64_t i = 0; i < over; ++i)
    counts[static_cast<size_t>(E - over + i)] = rest / over + (i < rest % over ? 1 : 0);
  counts[0] += first;
  std::vector<int64_t> offsets(static_cast<size_t>(E + 1), 0);
  for (size_t e = 0; e < counts.size(); ++e) offsets[e + 1] = offsets[e] + counts[e];
  return offsets;
}

// n bf16 values, random: a 32 MiB random block uploaded once, copied over the rest of the buffer.
void fill_random(bf16* p, int64_t n) {
  const int64_t block = std::min<int64_t>(n, int64_t{16} << 20);
  const std::vector<float> values = random_floats(block, 101, 0.5f);
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) bits[i] = mt::f32_to_bf16(values[i]);
  MT_CUDA_OK(cudaMemcpy(p, bits.data(), static_cast<size_t>(block) * 2, cudaMemcpyHostToDevice));
  for (int64_t at = block; at < n; at += block)
    MT_CUDA_OK(cudaMemcpyAsync(p + at, p, static_cast<size_t>(std::min(block, n - at)) * 2, cudaMemcpyDeviceToDevice,
                               test_stream()));
  mt::test::sync();
}

// Milliseconds per call of f after one untimed call.
template <typename F>
double milliseconds(F f) {
  return milliseconds_per_call(kTimedCalls, f);
}

}  // namespace

TEST_CASE("expert GEMMs probe: loop and CUTLASS against a dense GEMM of the same FLOPs", "[.moe_gemm_bench]") {
  MT_REQUIRE_GPU();
  const Projection projections[] = {
      {"Qwen3-30B-A3B", "gate+up", 128, 2048, 2 * 768, 32768 * 8},
      {"Qwen3-30B-A3B", "down", 128, 768, 2048, 32768 * 8},
      {"GPT-OSS-120B", "gate+up", 128, 2880, 2 * 2880, 32768 * 4},
      {"GPT-OSS-120B", "down", 128, 2880, 2880, 32768 * 4},
      {"DeepSeek-V3", "gate+up", 256, 7168, 2 * 2048, 16384 * 8},
      {"DeepSeek-V3", "down", 256, 2048, 7168, 16384 * 8},
      // The bench's DeepSeek-V3 layers (32 of the experts; one 4096-token sequence a micro-batch): what the step
      // model's experts' share is judged on (docs/PERFORMANCE.md, thirty-fifth session).
      {"DeepSeek-V3, 32 experts", "gate+up", 32, 7168, 2 * 2048, 4096 * 8},
      {"DeepSeek-V3, 32 experts", "down", 32, 2048, 7168, 4096 * 8},
  };
  const char* gemm_names[] = {"forward", "backward data", "backward weight"};
  for (const Projection& p : projections) {
    const int64_t R = p.rows, weights = p.E * p.O * p.I;
    DeviceBuffer<bf16> w(static_cast<size_t>(weights)), x(static_cast<size_t>(R * p.I)),
        dx(static_cast<size_t>(R * p.I)), y(static_cast<size_t>(R * p.O)), dy(static_cast<size_t>(R * p.O));
    DeviceBuffer<float> dw(static_cast<size_t>(weights));
    fill_random(w.get(), weights), fill_random(x.get(), R * p.I), fill_random(dy.get(), R * p.O);
    MT_CUDA_OK(cudaMemsetAsync(dw.get(), 0, static_cast<size_t>(weights) * 4, test_stream()));
    const double flops = 2.0 * static_cast<double>(R) * static_cast<double>(p.I) * static_cast<double>(p.O);
    const auto tflops = [&](double ms) { return flops / (ms * 1e-3) / 1e12; };
    // The dense GEMM: all R rows against expert 0's weight.
    mt::cuda::Gemm dense(test_stream(), mt::kGemmWorkspaceBytes);
    const DType b16 = DType::bf16;
    const double dense_tflops[3] = {
        tflops(milliseconds([&] { dense.run(y.get(), b16, x.get(), w.get(), b16, true, R, p.O, p.I, 1, 0); })),
        tflops(milliseconds([&] { dense.run(dx.get(), b16, dy.get(), w.get(), b16, false, R, p.I, p.O, 1, 0); })),
        tflops(milliseconds([&] { dense.run_at_b(dw.get(), dy.get(), x.get(), b16, p.O, p.I, R, 1, 1); }))};
    std::printf("moe_gemm_bench %s %s: %lld experts, %lld -> %lld, %lld rows, %.3f TFLOP a GEMM; dense %.1f / %.1f / "
                "%.1f TFLOP/s (forward / backward data / backward weight)\n",
                p.model, p.name, static_cast<long long>(p.E), static_cast<long long>(p.I), static_cast<long long>(p.O),
                static_cast<long long>(R), flops / 1e12, dense_tflops[0], dense_tflops[1], dense_tflops[2]);
    for (const bool one_holds_half : {false, true}) {
      const std::vector<int64_t> offsets = spread(p.E, R, one_holds_half);
      for (const mt::MoeGemmChoice mode : {mt::MoeGemmChoice::loop, mt::MoeGemmChoice::cutlass}) {
        mt::cuda::GroupedGemm grouped(test_stream(), mode, mt::kExpertGemmStreams);
        const int64_t stride = p.O * p.I;
        const double ms[3] = {
            milliseconds([&] {
              grouped.forward(y.get(), x.get(), w.get(), stride, offsets.data(), p.E, p.I, p.O, DType::bf16);
            }),
            milliseconds([&] {
              grouped.backward_data(dx.get(), dy.get(), w.get(), stride, offsets.data(), p.E, p.I, p.O, DType::bf16,
                                    0.0f);
            }),
            milliseconds([&] {
              grouped.backward_weight(dw.get(), dy.get(), x.get(), stride, offsets.data(), p.E, p.I, p.O, DType::bf16);
            })};
        for (int g = 0; g < 3; ++g)
          std::printf("moe_gemm_bench %s %s %s %-7s %-15s: %8.3f ms %7.1f TFLOP/s, %.2f of dense\n", p.model, p.name,
                      one_holds_half ? "one-expert-half" : "balanced",
                      mode == mt::MoeGemmChoice::loop ? "loop" : "cutlass", gemm_names[g], ms[g], tflops(ms[g]),
                      tflops(ms[g]) / dense_tflops[g]);
      }
    }
    mt::test::sync();
  }
}
