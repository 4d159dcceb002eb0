// Benchmark driver (see bench.h).
#include "cli/bench/bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/bench/stage_steps.h"
#include "cli/runtime/backend_select.h"
#include "cli/runtime/data_parallel_step.h"
#include "cli/runtime/optimizer_service.h"
#include "cli/runtime/run.h"
#include "model/flops.h"
#include "core/error.h"
#include "core/log.h"
#include "core/median.h"
#include "data/batch.h"
#include "dist/check.h"
#include "dist/data_parallel.h"
#include "engine/engine.h"
#include "model/model_source.h"
#include "model/param_layout.h"
#include "optim/optimizer.h"
#include "plan/cudnn_attention_plan.h"
#include "plan/memory_plan.h"
#include "plan/step_plan.h"
#include "plan/pass_batch_advice.h"
#include "plan/resident_plan.h"
#include "plan/resource_advice.h"
#include "plan/step_bound.h"
#include "plan/step_time.h"
#include "store/host_store.h"
#include "store/shared_memory_check.h"
#include "store/tier_log.h"
#include "store/tier_probe.h"

namespace mt {
namespace {

struct StepFigures {
  double step_s = 0, fb_s = 0, optim_s = 0, tokens_per_s = 0, tflops = 0, model_tflops = 0, h2d_gbs = 0, d2h_gbs = 0;
  double compute_busy = 0;
  double parameters_pass_s = 0, moments_pass_s = 0;  // the update before this step's (0 for the first)
};

// The keys a token of the batch attends over on average, as the model FLOPs count them (flops.h: per token, linear
// in its keys): the sequence length, or for packed examples Σ len² / Σ len over them.
int64_t attention_keys(const Batch& batch) {
  if (batch.segments.empty()) return batch.seq_len;
  double squares = 0, tokens = 0;
  for (int64_t b = 0; b < batch.num_seqs; ++b) {
    int64_t run = 0;
    for (int64_t i = 0; i <= batch.seq_len; ++i) {
      const auto at = static_cast<size_t>(b * batch.seq_len + i);
      if (i > 0 && (i == batch.seq_len || batch.segments[at] != batch.segments[at - 1])) {
        squares += static_cast<double>(run) * static_cast<double>(run);
        tokens += static_cast<double>(run);
        run = 0;
      }
      ++run;
    }
  }
  return static_cast<int64_t>(squares / std::max(tokens, 1.0) + 0.5);
}

// What the timed steps measured, on world rank 0 (the other compute ranks take part in the steps only).
struct Measures {
  ReferenceTiming reference;
  double reference_tokens_per_s = 0;
  std::vector<StepFigures> figures;  // the timed steps' (after the warm-up)
  nlohmann::json steps = nlohmann::json::array();
  ExpertOccupancy occupancy;              // the timed steps' MoE forwards
  int64_t checkpoint_bytes_per_step = 0;  // host placement: the checkpoints' D2H + H2D bytes of the last step
};

// The parameters pass of rank 0's slices over the timed steps that followed an update (0: none did).
double median_parameters_pass(const Measures& m) {
  std::vector<double> passes;
  for (const StepFigures& f : m.figures)
    if (f.parameters_pass_s > 0) passes.push_back(f.parameters_pass_s);
  return median(passes);
}

// --moe-hot-expert: a MoE layer's router row of expert 0 (its logit over the hidden state) × 1000, so that the tokens
// whose logit is positive rank it first whatever the others' (softmax, sigmoid and grouped routers alike).
void make_expert_hot(const Region& region, int64_t hidden, float* master) {
  if (region.kind != RegionKind::decoder_layer || region.offsets.moe.router < 0) return;
  float* row = master + region.offsets.moe.router;
  for (int64_t i = 0; i < hidden; ++i) row[i] *= 1000.0f;
}

// The bench's random weights (seed 1234) into the store's master and its streaming copy (the node's rank 0).
void fill_random_weights(const Run& run, HostStore& store, bool hot_expert) {
  const ParamLayout& layout = run.layout();
  const ModelSpec& spec = run.spec();
  const auto init = [&](int64_t r, float* master) {
    const Region& region = layout.regions[static_cast<size_t>(r)];
    init_region_random(region, spec.initializer_range, 1234, master);
    if (hot_expert) make_expert_hot(region, spec.hidden_size, master);
  };
  // Regions one after another, each tensor's values over every thread (init_region_random): one MoE region can
  // hold most of the parameters (GPT-OSS-120B's layer: 3.3 B), so threads per region would leave most cores idle.
  for (int64_t r = 0; r < store.num_regions(); ++r) {
    if (!store.in_ram(StateKind::master)) continue;
    init(r, store.master(r));
    store.refresh_stream_copy(r);
  }
  if (!store.in_ram(StateKind::master)) {  // through one region buffer into the tier
    std::vector<float> master(static_cast<size_t>(layout.largest_region_numel));
    for (int64_t r = 0; r < store.num_regions(); ++r) {
      init(r, master.data());
      store.write_region_state(r, StateKind::master, master.data());
      store.refresh_stream_copy(r, master.data());
    }
  }
}

// The stage's reference pass, then the warm-up and the timed steps. As in training, the update of step k runs while
// step k+1's forward streams each region as soon as it is updated: a step's time is from its forward's start to the
// next forward's start (the last step's update is waited for before the clock stops). Every compute rank takes part;
// world rank 0 logs and keeps the figures.
Measures time_steps(const BenchOptions& o, Run& run, StageSteps& stage) {
  Engine& engine = run.engine();
  const dist::DataParallel& dp = run.dp();
  const RunRoles& roles = run.roles();
  OptimizerService& optimizer = run.optimizer();
  const EngineOptions& eo = run.engine_options();
  const ModelSpec& spec = run.spec();
  const ParamLayout& layout = run.layout();
  // The reference pass first, as train runs it before step 1: forward only, the starting weights.
  Measures m;
  const ReferenceTiming& reference = m.reference = stage.reference_pass(engine, dp);
  m.reference_tokens_per_s =
      reference.seconds > 0 ? static_cast<double>(reference.tokens) / reference.seconds : 0.0;
  if (stage.has_reference() && !o.json)
    log::info("reference pass: {} tokens of {} steps' {} in {:.3f} s ({:.0f} tokens/s)", reference.tokens, o.warmup + o.steps,
              o.stage == "dpo" ? "pairs" : "examples", reference.seconds, m.reference_tokens_per_s);

  const int64_t total = o.warmup + o.steps;
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t step = 1; step <= total; ++step) {
    const Batch& batch = stage.batch(step);
    engine.take_transfer_stats();
    const int64_t checkpoint_bytes_before = engine.checkpoint_bytes_moved();
    if (!roles.leads_node && !o.skip_update) optimizer.expect_updates(step - 1);
    const StageStepLoss loss = stage.forward_backward(engine, dp, step, eo.passes);
    const auto t1 = std::chrono::steady_clock::now();
    // The previous step's update has finished: this backward waited for its last moments.
    const bool updated_before = step > 1 && !o.skip_update;
    const double parameters_pass_s = updated_before ? optimizer.last_update_seconds() : 0.0;
    const double moments_pass_s = updated_before ? optimizer.last_moments_seconds() : 0.0;
    if (roles.leads_node) {
      if (!o.skip_update) {  // --skip-update: the pipeline alone, the weights never change
        optimizer.submit(step, 1e-5, engine.gradient_sum_of_squares());
        optimizer.report();
      }
      if (step == total) optimizer.finish();
    } else if (step == total) {
      optimizer.wait_finished();
    }
    const auto t2 = std::chrono::steady_clock::now();
    const PipelineStats ts = engine.take_transfer_stats();
    const ExpertOccupancy step_occupancy = engine.take_expert_occupancy();
    m.checkpoint_bytes_per_step = engine.checkpoint_bytes_moved() - checkpoint_bytes_before;
    if (!roles.root) continue;
    StepFigures f;
    f.fb_s = std::chrono::duration<double>(t1 - t0).count();
    f.optim_s = std::chrono::duration<double>(t2 - t1).count();
    f.step_s = f.fb_s + f.optim_s;
    t0 = t2;
    const double tokens = static_cast<double>(batch.num_tokens);
    f.tokens_per_s = tokens / f.step_s;
    // A KTO batch's KL sequences run forward only: a third of a trained token's FLOPs.
    const int64_t forward_only = stage.forward_only_tokens(step);
    const StepFlops trained = step_flops(spec, layout, batch.num_tokens - forward_only, attention_keys(batch));
    const StepFlops forward = step_flops(spec, layout, forward_only, attention_keys(batch));
    f.tflops = (trained.six_n + forward.six_n / 3) / f.step_s / 1e12;
    f.model_tflops = (trained.model + forward.model / 3) / f.step_s / 1e12;
    f.h2d_gbs = ts.h2d_seconds > 0 ? static_cast<double>(ts.h2d_bytes) / ts.h2d_seconds / 1e9 : 0.0;
    f.d2h_gbs = ts.d2h_seconds > 0 ? static_cast<double>(ts.d2h_bytes) / ts.d2h_seconds / 1e9 : 0.0;
    f.compute_busy = 1.0 - ts.compute_wait_seconds / f.step_s;
    f.parameters_pass_s = parameters_pass_s;
    f.moments_pass_s = moments_pass_s;
    const bool measured = step > o.warmup;
    if (!o.json)
      log::info("{} {:>3} | loss {:.4f} | step {:.3f} s (fwd+bwd {:.3f}, optimizer {:.3f}) | {:.0f} tokens/s | "
                "{:.1f} TFLOP/s (6N) {:.1f} (model) | H2D {:.1f} GB/s ({:.2f} GB) | D2H {:.1f} GB/s | compute busy {:.1f}%{}",
                measured ? "step  " : "warmup", step, loss.objective, f.step_s, f.fb_s, f.optim_s, f.tokens_per_s,
                f.tflops, f.model_tflops, f.h2d_gbs, ts.h2d_bytes / 1e9, f.d2h_gbs, 100 * f.compute_busy,
                m.checkpoint_bytes_per_step > 0
                    ? MT_FORMAT(" | checkpoints {:.2f} GB to and from host RAM", m.checkpoint_bytes_per_step / 1e9)
                    : std::string());
    if (!measured) continue;
    m.occupancy.merge(step_occupancy);
    m.figures.push_back(f);
    m.steps.push_back({{"step_s", f.step_s}, {"tokens", batch.num_tokens}, {"fwd_bwd_s", f.fb_s}, {"optimizer_s", f.optim_s},
                       {"tokens_per_s", f.tokens_per_s}, {"tflops", f.tflops}, {"model_tflops", f.model_tflops},
                       {"h2d_gbs", f.h2d_gbs}, {"d2h_gbs", f.d2h_gbs}, {"compute_busy", f.compute_busy},
                       {"loss", loss.objective}, {"parameters_pass_s", f.parameters_pass_s},
                       {"moments_pass_s", f.moments_pass_s}});
  }
  return m;
}

// World rank 0's report of the timed steps: medians, the steady state, the optimizer's passes, the plan's prediction,
// as JSON (--json) or lines.
void report(const BenchOptions& o, Run& run, const StageSteps& stage, const Measures& m, DType stream,
            const TierSettings& tier, const DiskCeiling& disk) {
  Backend& backend = run.backend();
  HostStore& store = run.store();
  const ModelSpec& spec = run.spec();
  const ParamLayout& layout = run.layout();
  const dist::DataParallel& dp = run.dp();
  const EngineOptions& eo = run.engine_options();
  const RunShape& shape = run.shape();
  const ResidentPlan& resident = run.resident();
  const int64_t micro_batch = resolve_micro_batch(shape);  // as the engine clamps it to the pass
  if (const std::string profile = backend.op_profile(); !profile.empty()) log::info("{}", profile);
  // The plan's prediction (plan/step_time.h) at the plan's rates (--gpu-tflops: another step rate), and with the
  // state tier the slower of it and the state traffic at the probed bandwidth beside the forward.
  StepRates rates = run.rates();
  if (o.gpu_tflops > 0) rates.gpu_flops = o.gpu_tflops * 1e12;
  const StepTime predicted = predict_step_time(spec, shape, rates);
  const HostPlan host = plan_host(spec, stream, store.ranks(), tier.mode);
  const double flops_per_token = step_flops(spec, layout, 1, o.seq).model;
  const int64_t sequences = o.batch * stage.sequences_per_example();
  Machine machine;
  machine.nvme_gbs = disk.mixed_gbs();
  machine.gpu_tflops = flops_per_token * static_cast<double>(sequences * o.seq) / predicted.step_s / 1e12;  // the model's
  const NvmeTiming timing = nvme_timing(host, flops_per_token, sequences, o.seq, forward_share(spec, shape), machine);
  const double plan_gpu_s = timing.gpu_seconds, plan_nvme_s = timing.nvme_seconds;
  const double predicted_s = timing.predicted_seconds;
  auto med = [&](double StepFigures::*field) {
    std::vector<double> v;
    for (const auto& f : m.figures) v.push_back(f.*field);
    return median(v);
  };
  // The steady state: the timed steps whose update the next forward hides, i.e. all but the last, which also waits
  // for the run's final update (the only step when there is one).
  std::vector<double> steady, steady_wait;
  for (size_t i = 0; i + 1 < m.figures.size(); ++i) {
    steady.push_back(m.figures[i].step_s);
    steady_wait.push_back((1.0 - m.figures[i].compute_busy) * m.figures[i].step_s);
  }
  const double steady_step_s = steady.empty() ? med(&StepFigures::step_s) : median(steady);
  // What the compute stream waited for weights in a steady step, beside the plan's estimate of the first pass's
  // wait for the optimizer (plan/step_bound.h, at the run's rates: Run::rates).
  const double steady_wait_s = steady_wait.empty() ? 0.0 : median(steady_wait);
  const double plan_wait_s = step_bound(spec, shape, run.rates()).first_pass_wait_seconds;
  const PassBatchAdvice advice = advise_pass_batch(spec, shape, backend.device_memory_bytes(), run.rates());
  // The optimizer's passes in training (rank 0's slices, the updates the timed steps follow), and the parameters
  // pass's rate over the host regions (every rank updates its slices at once).
  std::vector<double> moments_passes;
  for (const auto& f : m.figures)
    if (f.parameters_pass_s > 0) moments_passes.push_back(f.moments_pass_s);
  const double parameters_pass_s = median_parameters_pass(m), moments_pass_s = median(moments_passes);
  const double host_parameters = static_cast<double>(layout.total_numel - resident.parameters);
  const double parameters_pass_rate = parameters_pass_s > 0 ? host_parameters / parameters_pass_s / 1e9 : 0.0;
  const double step_tokens_per_s = med(&StepFigures::tokens_per_s);
  const double reference_ratio = step_tokens_per_s > 0 ? m.reference_tokens_per_s / step_tokens_per_s : 0.0;
  nlohmann::json summary = {{"model", o.model},
                            {"stage", o.stage},
                            {"pref_loss", stage.stage() == BenchStage::dpo ? o.pref_loss : std::string()},
                            {"backend", backend.name()},
                            {"dtype", o.dtype},
                            {"stream_dtype", dtype_name(stream)},
                            {"parameters", layout.total_numel},
                            {"layers", spec.num_layers},
                            {"batch", o.batch},
                            {"seq", o.seq},
                            {"slots", o.slots},
                            {"gpus", dp.size},
                            {"checkpoint_interval", o.checkpoint_interval},
                            {"passes", eo.passes},
                            {"micro_batch", micro_batch},
                            {"recompute_layers", eo.recompute_layers},
                            {"memory_recompute_layers", run.memory_recompute_layers()},
                            {"memory_recompute_predicted_step_s", run.step_plan().memory_recompute_step_s},
                            {"memory_passes", run.pass_choice().memory_passes},
                            {"moe_keep_layers", eo.moe_keep_layers},
                            {"activation_checkpoints", checkpoint_placement_name(eo.checkpoints)},
                            {"m.checkpoint_bytes_per_step", m.checkpoint_bytes_per_step},
                            {"median_step_s", med(&StepFigures::step_s)},
                            {"steady_step_s", steady_step_s},
                            {"median_fwd_bwd_s", med(&StepFigures::fb_s)},
                            {"median_optimizer_s", med(&StepFigures::optim_s)},
                            {"skip_update", o.skip_update},
                            {"gpu_resident_parameters", resident.parameters},
                            {"median_tokens_per_s", step_tokens_per_s},
                            {"reference_pass_s", m.reference.seconds},
                            {"reference_tokens", m.reference.tokens},
                            {"reference_tokens_per_s", m.reference_tokens_per_s},
                            {"reference_to_step_tokens_per_s", reference_ratio},
                            {"median_tflops", med(&StepFigures::tflops)},
                            {"median_model_tflops", med(&StepFigures::model_tflops)},
                            {"median_h2d_gbs", med(&StepFigures::h2d_gbs)},
                            {"median_d2h_gbs", med(&StepFigures::d2h_gbs)},
                            {"median_compute_busy", med(&StepFigures::compute_busy)},
                            {"steady_compute_wait_s", steady_wait_s},
                            {"plan_first_pass_wait_s", plan_wait_s},
                            {"plan_recommended_pass_batch", advice.batch},
                            {"median_parameters_pass_s", parameters_pass_s},
                            {"median_moments_pass_s", moments_pass_s},
                            {"parameters_pass_gparams_per_s", parameters_pass_rate},
                            {"moe_expert_occupancy", m.occupancy.fraction()},
                            {"moe_lowest_expert_occupancy", m.occupancy.forwards ? m.occupancy.lowest : 0.0},
                            {"moe_busiest_expert_share", m.occupancy.busiest()},
                            {"moe_hot_expert", o.moe_hot_expert},
                            {"peak_gpu_memory_gib", static_cast<double>(backend.peak_memory_bytes()) / (1 << 30)},
                            {"host_bytes_per_parameter", store.bytes_per_parameter()},
                            {"offload", offload_mode_name(tier.mode)},
                            {"nvme_bytes", host.nvme_bytes},
                            {"disk_write_gbs", disk.write_gbs},
                            {"disk_read_gbs", disk.read_gbs},
                            {"plan_gpu_step_s", plan_gpu_s},
                            {"plan_nvme_step_s", plan_nvme_s},
                            {"predicted_step_s", predicted_s},
                            {"predicted_error_pct", 100.0 * (predicted_s - steady_step_s) / steady_step_s},
                            {"predicted_compute_s", predicted.compute_s},
                            {"predicted_dense_s", predicted.dense_s},
                            {"predicted_head_s", predicted.head_s},
                            {"predicted_attention_s", predicted.attention_s},
                            {"predicted_experts_s", predicted.experts_s},
                            {"predicted_recompute_s", predicted.recompute_s},
                            {"predicted_resident_update_s", predicted.resident_update_s},
                            {"predicted_stream_wait_s", predicted.stream_wait_s},
                            {"predicted_optimizer_wait_s", predicted.optimizer_wait_s},
                            {"predicted_h2d_bytes", predicted.h2d_bytes},
                            {"predicted_d2h_bytes", predicted.d2h_bytes},
                            {"resident_regions", shape.resident_regions},
                            {"cudnn_call_batch", shape.cudnn_call_batch},
                            {"plan_gpu_flops", run.rates().gpu_flops},  // the plan's rates (Run::rates)
                            {"plan_pcie_bytes", run.rates().pcie_bytes},
                            {"plan_parameters_pass_params", run.rates().parameters_pass_params},
                            {"steps", m.steps}};
  if (o.json) {
    std::printf("%s\n", summary.dump().c_str());
  } else {
    log::info("median: step {:.3f} s | {:.0f} tokens/s | {:.1f} TFLOP/s (6N) {:.1f} (model) | H2D {:.1f} GB/s | "
              "D2H {:.1f} GB/s | compute busy {:.1f}% | peak GPU memory {:.2f} GiB | host {} bytes/parameter",
              med(&StepFigures::step_s), med(&StepFigures::tokens_per_s), med(&StepFigures::tflops),
              med(&StepFigures::model_tflops),
              med(&StepFigures::h2d_gbs), med(&StepFigures::d2h_gbs), 100 * med(&StepFigures::compute_busy),
              summary["peak_gpu_memory_gib"].get<double>(), store.bytes_per_parameter());
    if (stage.has_reference())
      log::info("reference pass: {:.0f} tokens/s in {:.3f} s, {:.2f}x the {} step's {:.0f} tokens/s", m.reference_tokens_per_s,
                m.reference.seconds, reference_ratio, o.stage, step_tokens_per_s);
    log::info("steady step: compute waited {:.3f} s for weights; the plan puts the first pass's wait for the "
              "optimizer's parameters pass at {:.3f} s, and recommends {} sequences of {} a pass (plan/"
              "pass_batch_advice.h)", steady_wait_s, plan_wait_s, advice.batch, o.seq);
    log::info("{}{}; measured steady step {:.3f} s: the prediction {:+.1f} % off", describe_step_time(predicted),
              tier.mode == OffloadMode::none ? std::string() : MT_FORMAT(", {:.3f} s with the state tier", predicted_s),
              steady_step_s, 100.0 * (predicted_s - steady_step_s) / steady_step_s);
    if (m.occupancy.forwards > 0)
      log::info("experts with tokens: {:.2f} % of the {} expert slots of {} MoE layer forwards over a micro-batch "
                "(the fewest in one: {:.2f} %); the busiest expert took {:.1f} % of a forward's tokens on average{}",
                100 * m.occupancy.fraction(), m.occupancy.experts, m.occupancy.forwards, 100 * m.occupancy.lowest,
                100 * m.occupancy.busiest(), o.moe_hot_expert ? " (--moe-hot-expert)" : "");
    if (parameters_pass_s > 0)
      log::info("optimizer in training: parameters pass {:.3f} s ({:.2f} G parameters/s over {:.3f} B on the host), "
                "moments pass {:.3f} s", parameters_pass_s, parameters_pass_rate, host_parameters / 1e9,
                moments_pass_s);
    if (const StateTier* t = store.tier()) {
      log_state_tier(*t);
      log::info("plan (store.offload {}): state traffic {:.2f} GB per step at the probed {:.2f} GB/s (write {:.2f}, "
                "read {:.2f}) = {:.3f} s, GPU model FLOPs at {:.0f} TFLOP/s {:.3f} s of which the forward ({:.3f} s) "
                "overlaps it: predicted step {:.3f} s, measured {:.3f} s ({:+.1f} %)", offload_mode_name(tier.mode),
                static_cast<double>(host.nvme_step_bytes()) / 1e9, disk.mixed_gbs(), disk.write_gbs, disk.read_gbs,
                plan_nvme_s, machine.gpu_tflops, plan_gpu_s, timing.forward_seconds, predicted_s,
                med(&StepFigures::step_s), 100.0 * (med(&StepFigures::step_s) - predicted_s) / predicted_s);
    }
  }
}

// The shape one GPU of the bench runs with, as train's preflight plans it: its share of the global batch, the
// flags' choices, and what they leave to auto resolved for the GPU (resolve_by_step: resolve_auto, with the pass
// count by the predicted step).
RunShape requested_shape(const BenchOptions& o, Run& run, const StageSteps& stage, const TierSettings& tier,
                         DType dtype, DType stream, const RuntimeSwitches& switches, PassChoice* passes) {
  const dist::DataParallel& dp = run.dp();
  const int64_t gpu_bytes = run.backend().device_memory_bytes();
  RunShape requested;
  requested.dtype = dtype;
  requested.stream_dtype = stream;
  requested.seq_len = o.seq;
  requested.batch_size = (o.batch + dp.size - 1) / dp.size * stage.sequences_per_example();  // as train's preflight
  requested.passes = o.passes;
  requested.checkpoint_interval = o.checkpoint_interval;
  requested.weight_slots = o.slots;
  requested.ranks = run.store().ranks();  // ranks of the node sharing the store
  requested.offload = tier.mode;
  requested.micro_batch_size = o.micro_batch;
  if (o.recompute_layers >= 0) requested.recompute_layers = o.recompute_layers;
  if (o.moe_keep_layers >= 0) requested.moe_keep_layers = o.moe_keep_layers;  // auto: the plan's choice
  requested.checkpoints = checkpoint_placement_from_name(o.activation_checkpoints);
  requested.runtime = switches;
  requested.cudnn_attention = cudnn_attention_for(requested.dtype, gpu_bytes, switches);
  requested.packed = !o.pack.empty();
  // The rest as Run::plan weighs it (run_bench's call).
  const StepChoiceInputs weighed{dp.size, o.optimizer_on_gpu == "auto" && !o.skip_update, o.moe_keep_layers, run.rates()};
  *passes = resolve_by_step(run.spec(), requested, gpu_bytes, o.recompute_layers < 0, weighed);
  MT_REQUIRE(stage.stage() == BenchStage::sft || o.batch >= dp.size * requested.passes,
             "bench: --batch {} ({} of a step) does not split into {} GPU rank(s) × {} gradient accumulation passes; "
             "raise it to at least {}", o.batch, o.stage == "dpo" ? "pairs" : "examples", dp.size, requested.passes,
             dp.size * requested.passes);
  return requested;
}

}  // namespace

void run_bench(const BenchOptions& o) {
  const RuntimeSwitches switches = environment_switches();  // bench reads no config: the variables alone, once
  const ModelSource source = resolve_model_source(o.model);
  ModelSpec shape_file = load_model_spec(source.config_json, true);  // a shape to measure: no modeling code runs
  StageSteps stage(o, shape_file.vocab_size, o.warmup + o.steps);  // the batches, checked before anything runs
  MT_REQUIRE(o.first_layer == 0 || (o.layers > 0 && o.first_layer + o.layers <= shape_file.num_layers),
             "bench: --first-layer {} needs --layers, and the {} layers from it must be among the shape's {}",
             o.first_layer, o.layers, shape_file.num_layers);
  if (o.layers > 0) shape_file = layer_range(shape_file, o.first_layer, o.layers);
  const dist::DataParallel dp = dist::make_data_parallel(gpus_per_node(o.gpus_per_node), visible_gpu_numa_nodes());
  Run run(std::move(shape_file), dp);
  const ModelSpec& spec = run.spec();
  const ParamLayout& layout = run.layout();
  const RunRoles& roles = run.roles();
  const DType dtype = dtype_from_name(o.dtype);
  const DType stream = dtype_from_name(o.stream_dtype);
  MT_REQUIRE(!(dtype == DType::f32 && stream == DType::bf16), "--stream-dtype bfloat16 cannot feed --dtype float32");
  MT_REQUIRE(!o.moe_hot_expert ||
                 std::any_of(spec.layers.begin(), spec.layers.end(), [](const LayerSpec& l) { return l.moe.active(); }),
             "bench: --moe-hot-expert needs mixture-of-experts layers, and the layers of {} it runs have none", o.model);
  const TierSettings tier{offload_mode_from_name(o.offload), o.offload_paths, "bench", switches.tier_io};
  MT_REQUIRE(tier.mode == OffloadMode::none || !o.offload_paths.empty(), "bench: --offload {} needs --offload-paths",
             o.offload);
  MT_REQUIRE(!offloads_master(tier.mode) || stream == DType::bf16,
             "bench: --offload optimizer+master streams the bf16 copy: add --stream-dtype bfloat16");
  if (roles.root && tier.mode != OffloadMode::none) {
    const std::string shortfall = tier_path_shortfall(layout, tier, dist::context().node_size);
    MT_REQUIRE(shortfall.empty(), "bench: {}", shortfall);
  }
  DiskCeiling disk;  // rank 0, before the tier's files take the space
  if (roles.root && tier.mode != OffloadMode::none)
    disk = measure_disk_ceiling(o.offload_paths, static_cast<int64_t>(o.probe_gb * 1e9), switches.tier_io);
  OptimizerSettings settings;
  settings.passes = update_passes();
  run.open_store(stream, tier, settings);
  HostStore& store = run.store();
  OptimizerService& optimizer = run.optimizer();
  if (roles.leads_node) fill_random_weights(run, store, o.moe_hot_expert);
  run.store_filled();
  if (!roles.computes) return optimizer.serve({});
  if (!roles.root) log::set_level(log::Level::warn);
  Backend& backend = run.select_backend(dtype, switches);
  PassChoice passes;
  const RunShape requested = requested_shape(o, run, stage, tier, dtype, stream, switches, &passes);
  const RunShape& shape = run.plan(requested, o.optimizer_on_gpu == "auto" && !o.skip_update, o.moe_keep_layers,
                                   o.recompute_layers < 0, passes);
  const ResidentPlan& resident = run.resident();
  const GpuPlan& planned = run.gpu_plan();
  if (shape.cudnn_attention) log::info("bench: attention plan: {}", CudnnAttentionPlan(switches).describe_plan(planned));
  const int64_t micro_batch = resolve_micro_batch(shape);  // as the engine clamps it to the pass
  if (shape.checkpoints == CheckpointPlacement::host)
    log::info("bench: activation checkpoints in host RAM ({} page-locked), staging {} on the GPU",
              format_bytes(static_cast<uint64_t>(planned.host_checkpoints)),
              format_bytes(static_cast<uint64_t>(planned.checkpoints)));
  if (resident.regions > 0) log::info("bench: {}", describe_resident(resident, layout));
  if (run.step_plan().moe_layers > 0) log::info("bench: MoE: {}", describe_step_plan(run.step_plan()));
  run.start_engine(o.checkpoint_interval, std::max(o.seq, spec.max_position_embeddings), o.slots);
  const EngineOptions& eo = run.engine_options();
  const double params = static_cast<double>(layout.total_numel);
  log::info("bench: {} ({:.3f} B parameters, {} layers, {} recompute in backward) on {} ({}), stage {}, batch {} {} x "
            "{} tokens in {} pass(es) of micro-batches of {} sequences, {} slots, {} GPU rank(s) per node on {} node(s)",
            o.model, params / 1e9, spec.num_layers, eo.recompute_layers, backend.name(), o.dtype, o.stage, o.batch,
            stage.stage() == BenchStage::dpo   ? MT_FORMAT("pairs ({})", o.pref_loss)
            : stage.stage() == BenchStage::kto ? std::string("examples (and their KL sequences)")
                                               : std::string("sequences"),
            o.seq, eo.passes, micro_batch, o.slots, dp.per_node, dp.nodes);
  const Measures measures = time_steps(o, run, stage);
  if (!roles.root) return;
  report(o, run, stage, measures, stream, tier, disk);
  if (tier.mode == OffloadMode::none) run.keep_parameters_pass(median_parameters_pass(measures));  // the NVMe tier's is its own
}

}  // namespace mt
