// The predicted step (plan/step_time.h) against bench's measured steady steps: each row is a recorded run (shape,
// batch, the card, the rates the machine has, the plan's choices as that run made them, the measured step) and the
// model's prediction for it must be within 10 %. The MoE keep choice for Qwen3-30B-A3B (10 layers, 64 × 4096) is the
// count that measured fastest on the H100 (none: keeping 7 ran 12 % slower) and the H200's measured choice (none).
#include <algorithm>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "catch.h"
#include "model/model_spec.h"
#include "model/param_layout.h"
#include "plan/memory_plan.h"
#include "plan/step_plan.h"
#include "plan/step_rates.h"
#include "plan/step_time.h"

namespace {

constexpr int64_t kH100 = int64_t{81559} << 20;   // what an H100 80 GB reports
constexpr int64_t kH200 = int64_t{143771} << 20;  // what the H200 reports

struct Rates {
  double gemm_tflops, h2d_gbs, d2h_gbs, parameters_gps;
};
// The H100 80 GB: the rates test_plan_on_rates.cpp takes, as its probe measured them (GEMM 906 TFLOP/s: layer shapes
// 725; page-locked copies 55 GB/s each way; the parameters pass 11.12 G/s alone: 6.6 in training; issue #49).
constexpr Rates kH100Rates{906, 55, 55, 11.12};
// A probe's figures with the parameters pass as training measured it (G parameters/s), stated as the probe that
// gives it (plan/step_rates.h takes a probe's pass to training's by kTrainingPassPerProbePass).
constexpr Rates trained(Rates probe, double training_pass_gps) {
  probe.parameters_gps = training_pass_gps / mt::kTrainingPassPerProbePass;
  return probe;
}
// The H200 141 GB: no probe has run on it; its GEMM is taken as the H100's probe (the same GH100 compute at the same
// clocks), its copies and parameters pass as measured on the H200 node in training (55 GB/s, 5.9 G/s;
// docs/PERFORMANCE.md).
constexpr Rates kH200Rates = trained({906, 55, 55, 0}, 5.9);
// The thirtieth session's two H100 nodes, as their probes measured them; each row takes the parameters pass its run
// measured in training (the probes' 3.78 and 14.27 did not tell it).
constexpr Rates kNodeA{904, 55.5, 55.3, 3.78};
constexpr Rates kNodeB{901, 55.3, 55.2, 14.27};
// The thirty-fifth session's H100 node, as its probe measured it.
constexpr Rates kNodeC{904, 55.5, 55.3, 10.09};

struct Row {
  const char* model;
  int64_t layers;  // the first ones (bench --layers); 0: all
  int64_t batch, seq;
  const char* card;
  Rates rates;
  // The plan's choices as the run made them (bench's log and JSON).
  int64_t passes, micro_batch, recompute, keep, resident, call_batch;
  double measured_s;  // the steady step (median of the steps after the warm-up, the last left out)
  const char* source;
};

const std::vector<Row>& rows() {
  static const std::vector<Row> table = {
      // H100 80 GB (issue #49's figures; docs/PERFORMANCE.md): Qwen2.5-3B 475.7 / 452.1 / 431.4 / 451.3 TFLOP/s 6N.
      {"qwen2.5-3b", 0, 8, 1024, "H100", kH100Rates, 1, 8, 0, 0, 35, 0, 0.319, "issue #49"},
      {"qwen2.5-3b", 0, 16, 1024, "H100", kH100Rates, 1, 16, 0, 0, 21, 0, 0.671, "issue #49"},
      {"qwen2.5-3b", 0, 32, 1024, "H100", kH100Rates, 1, 16, 2, 0, 0, 0, 1.406, "issue #49"},
      {"qwen2.5-3b", 0, 64, 1024, "H100", kH100Rates, 1, 16, 21, 0, 0, 0, 2.690, "issue #49"},
      {"qwen2.5-7b", 0, 64, 1024, "H100", kH100Rates, 1, 8, 21, 0, 0, 0, 5.870, "issue #49: 510 TFLOP/s 6N"},
      {"qwen3-30b-a3b", 10, 64, 4096, "H100", kH100Rates, 4, 8, 0, 7, 2, 2, 7.975, "twenty-fifth session"},
      {"qwen3-30b-a3b", 10, 64, 4096, "H100", kH100Rates, 4, 8, 0, 0, 3, 2, 7.115, "twenty-fifth session"},
      // H100 80 GB, twenty-ninth session (main d27f8d1; the plan chose on the H200's constants there).
      {"qwen2.5-3b", 0, 16, 1024, "H100", kH100Rates, 1, 16, 0, 0, 21, 0, 0.644, "twenty-ninth session"},
      {"qwen3-30b-a3b", 10, 64, 4096, "H100", kH100Rates, 4, 8, 0, 0, 3, 2, 7.001, "twenty-ninth session: 7.001-7.100"},
      // H200 141 GB.
      {"qwen3-30b-a3b", 10, 64, 4096, "H200", kH200Rates, 1, 8, 0, 0, 2, 2, 4.35, "fourteenth session: 4.23-4.38"},
      {"gpt-oss-120b", 1, 104, 4096, "H200", kH200Rates, 1, 8, 0, 0, 3, 0, 3.83, "fourteenth session"},
      {"qwen2.5-3b", 0, 32, 1024, "H200", kH200Rates, 1, 16, 0, 0, 38, 0, 1.18, "thirteenth session"},
      // H100 80 GB, thirtieth session (the plan chose on the probed rates, the passes and the recompute count by the
      // predicted step; each row's parameters pass as its run measured it in training).
      {"qwen2.5-3b", 0, 16, 1024, "H100", trained(kNodeA, 5.37), 1, 16, 18, 0, 33, 0, 0.661, "thirtieth session"},
      {"qwen2.5-3b", 0, 16, 1024, "H100", trained(kNodeA, 5.29), 1, 16, 0, 0, 21, 0, 0.657, "thirtieth session"},
      {"qwen2.5-3b", 0, 32, 1024, "H100", trained(kNodeA, 4.24), 1, 16, 24, 0, 27, 0, 1.320, "thirtieth session"},
      {"qwen2.5-3b", 0, 32, 1024, "H100", trained(kNodeA, 4.79), 1, 16, 3, 0, 0, 0, 1.592, "thirtieth session"},
      {"qwen2.5-3b", 0, 64, 1024, "H100", trained(kNodeA, 5.98), 1, 16, 30, 0, 23, 0, 2.678, "thirtieth session"},
      {"qwen2.5-3b", 0, 64, 1024, "H100", trained(kNodeA, 5.78), 1, 16, 21, 0, 0, 0, 2.680, "thirtieth session"},
      {"qwen3-30b-a3b", 10, 64, 4096, "H100", trained(kNodeA, 6.43), 1, 8, 10, 0, 4, 2, 4.717, "thirtieth session"},
      {"qwen3-30b-a3b", 10, 64, 4096, "H100", trained(kNodeA, 6.40), 4, 8, 10, 0, 5, 1, 6.476, "thirtieth session"},
      // The second node: Qwen2.5-7B at 32 × 1024 with the plan's 11 layers recomputing and with 16 and 22 forced.
      {"qwen2.5-7b", 0, 32, 1024, "H100", trained(kNodeB, 6.80), 1, 8, 11, 0, 0, 0, 3.176, "thirtieth session"},
      {"qwen2.5-7b", 0, 32, 1024, "H100", trained(kNodeB, 8.05), 1, 8, 16, 0, 2, 0, 2.974, "thirtieth session"},
      {"qwen2.5-7b", 0, 32, 1024, "H100", trained(kNodeB, 7.81), 1, 8, 22, 0, 7, 0, 2.918, "thirtieth session"},
      {"qwen2.5-7b", 0, 64, 1024, "H100", trained(kNodeB, 7.39), 1, 8, 21, 0, 0, 0, 5.867, "thirtieth session"},
      // H100 80 GB, thirty-fourth session (main 282da38: the experts' gate and up as one GEMM; the plan chose on the
      // H200's constants, then runtime.step_rates' default, and no probe ran: the GEMM and copies as kH100Rates', the
      // parameters pass as each run measured it in training).
      {"qwen2.5-7b", 0, 32, 1024, "H100", trained(kH100Rates, 4.89), 1, 8, 11, 0, 0, 0, 3.610, "thirty-fourth session"},
      {"qwen3-30b-a3b", 10, 64, 4096, "H100", trained(kH100Rates, 4.78), 1, 8, 6, 0, 1, 2, 5.042,
       "thirty-fourth session"},
      // H100 80 GB, thirty-fifth session (the plan on the card's cached probe): Qwen2.5-7B beside the Cohere families'
      // 8B shapes at 32 × 1024, all or nearly all layers recomputing to hold 9-12 regions' state on the GPU.
      {"qwen2.5-7b", 0, 32, 1024, "H100", trained(kNodeC, 6.21), 1, 8, 28, 0, 12, 0, 3.033, "thirty-fifth session"},
      {"aya-expanse-8b", 0, 32, 1024, "H100", trained(kNodeC, 5.80), 1, 8, 29, 0, 9, 0, 3.529, "thirty-fifth session"},
      {"c4ai-command-r7b-12-2024", 0, 32, 1024, "H100", trained(kNodeC, 5.53), 1, 8, 32, 0, 11, 0, 3.427,
       "thirty-fifth session"},
      // GPT-OSS-120B's layer 0 (128 experts, top 4, its 128-token window) at 104 × 4096: 2 passes of micro-batches
      // of 2.
      {"gpt-oss-120b", 1, 104, 4096, "H100", trained(kNodeC, 5.81), 2, 2, 0, 0, 0, 0, 6.807, "thirty-fifth session"},
  };
  return table;
}

mt::StepRates rates_of(const Rates& r) {
  mt::MeasuredRates m;
  m.gemm_flops = r.gemm_tflops * 1e12;
  m.h2d_bytes = r.h2d_gbs * 1e9;
  m.d2h_bytes = r.d2h_gbs * 1e9;
  m.parameters_pass_params = r.parameters_gps * 1e9;
  return mt::step_rates_of(m);
}

mt::ModelSpec model(const Row& row) {
  const mt::ModelSpec spec =
      mt::load_model_spec(std::string(MEGATRAIN_SOURCE_DIR "/configs/models/") + row.model + ".json");
  return row.layers > 0 ? mt::first_layers(spec, row.layers) : spec;
}

int64_t gpu_bytes(const Row& row) { return std::string(row.card) == "H100" ? kH100 : kH200; }

// `megatrain bench --model M [--layers N] --seq S --batch B` (bf16, the fp32 master streamed, cuDNN attention),
// resolved by resolve_auto as bench resolves it.
mt::RunShape bench_run(const mt::ModelSpec& spec, const Row& row) {
  mt::RunShape r;
  r.dtype = mt::DType::bf16;
  r.stream_dtype = mt::DType::f32;
  r.seq_len = row.seq;
  r.batch_size = row.batch;
  r.passes = row.passes;  // as the plan chose it (by memory, or from the thirtieth session by the step)
  r.micro_batch_size = 0;
  r.checkpoint_interval = 1;
  r.cudnn_attention = true;
  mt::resolve_auto(spec, r, gpu_bytes(row), true);
  return r;
}

}  // namespace

TEST_CASE("the predicted step is within 10 % of every recorded steady step", "[plan][step-time]") {
  for (const Row& row : rows()) {
    const mt::ModelSpec spec = model(row);
    mt::RunShape run = bench_run(spec, row);
    INFO(row.model << " " << row.batch << " x " << row.seq << " on the " << row.card << ", " << row.keep
                   << " MoE layers keeping, " << row.resident << " regions resident (" << row.source << ")");
    // The resolved shape is the run's; the recompute count (at least the memory's: from the thirtieth session the
    // plan may recompute more, plan/step_plan.h), the MoE keep count, the resident regions and cuDNN's calls as
    // it chose them.
    CHECK(run.micro_batch_size == row.micro_batch);
    CHECK(run.recompute_layers <= row.recompute);
    run.recompute_layers = row.recompute;
    run.moe_keep_layers = row.keep;
    run.resident_regions = row.resident;
    run.cudnn_call_batch = row.call_batch;
    const mt::StepTime t = mt::predict_step_time(spec, run, rates_of(row.rates));
    const double error = (t.step_s - row.measured_s) / row.measured_s;
    std::cout << row.model << " " << row.batch << "x" << row.seq << " " << row.card << " keep " << row.keep
              << " resident " << row.resident << ": measured " << row.measured_s << " s, " << mt::describe_step_time(t)
              << " (" << 100 * error << " %)\n";
    INFO(mt::describe_step_time(t) << "; measured " << row.measured_s << " s");
    CHECK(std::abs(error) <= 0.10);
    CHECK(t.step_s == Approx(t.compute_s + t.resident_update_s + t.stream_wait_s + t.optimizer_wait_s));
    CHECK(t.compute_s == Approx(t.dense_s + t.head_s + t.attention_s + t.experts_s));
  }
}

TEST_CASE("the MoE keep choice is what measured fastest: none for Qwen3-30B-A3B at 64 x 4096", "[plan][step-time]") {
  for (const char* card : {"H100", "H200"}) {
    const Row& row = *std::find_if(rows().begin(), rows().end(), [&](const Row& r) {
      return std::string(r.model) == "qwen3-30b-a3b" && std::string(r.card) == card;
    });
    INFO("the " << card);
    const mt::ModelSpec spec = model(row);
    const mt::RunShape run = bench_run(spec, row);
    const mt::StepPlan p = mt::plan_step(spec, run, gpu_bytes(row), 1, true, -1, rates_of(row.rates));
    INFO(mt::describe_step_plan(p));
    CHECK(p.layers == 0);
    // Keeping none keeps the most optimizer state on the GPU (the embedding and layers 0-1 on the H100, the embedding
    // and layer 0 on the H200), as the fastest measured runs had it.
    CHECK(p.resident.regions == (std::string(card) == "H100" ? 3 : 2));
  }
}

TEST_CASE("the step's copies follow the pipeline: slots reused, resident regions, the passes' gradient sums",
          "[plan][step-time]") {
  // Qwen3-30B-A3B, 10 layers, 64 × 4096 on the H100: 4 passes, 3 regions resident.
  const Row& row = *std::find_if(rows().begin(), rows().end(), [](const Row& r) {
    return std::string(r.model) == "qwen3-30b-a3b" && std::string(r.card) == "H100" && r.keep == 0;
  });
  const mt::ModelSpec spec = model(row);
  const mt::ParamLayout layout = mt::make_param_layout(spec);
  mt::RunShape run = bench_run(spec, row);
  run.resident_regions = 3;
  const auto n = [&](int64_t r) { return static_cast<double>(layout.regions[static_cast<size_t>(r)].numel); };
  // A pass copies the streamed regions forward (layers 2-9 and the head: regions 3-11), then backward layers 8 down
  // to 2 (layer 9 is still in its slot after the head); every pass sends the host regions' fp32 gradients out, and
  // each after the first brings the host's sum in.
  double forward = 0, backward = 0, host = 0;
  for (int64_t r = 3; r <= 11; ++r) {
    forward += n(r);
    host += n(r);
  }
  for (int64_t r = 3; r <= 9; ++r) backward += n(r);
  const mt::StepTime t = mt::predict_step_time(spec, run, rates_of(row.rates));
  CHECK(t.h2d_bytes == Approx(4 * 4.0 * (forward + backward) + 3 * 4.0 * host));
  CHECK(t.d2h_bytes == Approx(4 * 4.0 * host));
  // Keeping every MoE layer saves exactly the recompute of their routers and gate and up GEMMs; the copies stay.
  mt::RunShape keeping = run;
  keeping.moe_keep_layers = 10;
  const mt::StepTime k = mt::predict_step_time(spec, keeping, rates_of(row.rates));
  CHECK(k.recompute_s == 0);
  CHECK(k.compute_s == Approx(t.compute_s - t.recompute_s));
  CHECK(k.h2d_bytes == t.h2d_bytes);
  // Every region resident in one pass: nothing crosses and nothing is waited for.
  mt::RunShape all = run;
  all.passes = 1;
  all.batch_size = 4;
  all.resident_regions = static_cast<int64_t>(layout.regions.size());
  const mt::StepTime a = mt::predict_step_time(spec, all, rates_of(row.rates));
  CHECK(a.h2d_bytes == 0);
  CHECK(a.d2h_bytes == 0);
  CHECK(a.stream_wait_s == 0);
  CHECK(a.optimizer_wait_s == 0);
  CHECK(a.step_s == Approx(a.compute_s + a.resident_update_s));
}
