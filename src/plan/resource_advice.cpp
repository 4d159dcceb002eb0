// Sizing advice (see resource_advice.h): searches over checkpoint_interval and micro_batch_size with the plan.
#include "plan/resource_advice.h"

#include <cmath>

#include <algorithm>

#include "core/error.h"
#include "model/flops.h"
#include "store/shared_memory_check.h"

namespace mt {
namespace {

bool gpu_fits(const ModelSpec& spec, const RunShape& run, const Machine& m) { return plan_gpu(spec, run).total() <= m.gpu_bytes; }

}  // namespace

ResourceAdvice advise(const ModelSpec& spec, RunShape run, const Machine& machine, bool choose_recompute,
                      const StepRates* rates) {
  ResourceAdvice a;
  RunShape given = run;  // auto passes read as one until resolve_auto chooses them, below
  given.passes = std::max<int64_t>(run.passes, 1);
  RunShape probe = given;
  probe.micro_batch_size = 1;
  for (int64_t c = 1; c <= spec.num_layers && !a.recommended_interval; ++c) {
    probe.checkpoint_interval = c;
    if (gpu_fits(spec, probe, machine)) a.recommended_interval = c;
  }
  const bool choose = run.checkpoint_interval == 0;
  if (choose) run.checkpoint_interval = a.recommended_interval ? a.recommended_interval : 1;
  if (a.recommended_interval) {
    probe.checkpoint_interval = a.recommended_interval;
    for (int64_t mb = probe.batch_size / probe.passes; mb >= 1 && !a.largest_micro_batch; --mb) {
      probe.micro_batch_size = mb;
      if (gpu_fits(spec, probe, machine)) a.largest_micro_batch = mb;
    }
  }
  if (choose && run.micro_batch_size == 0 && a.largest_micro_batch &&
      resolve_micro_batch(given) > a.largest_micro_batch)
    run.micro_batch_size = a.largest_micro_batch;
  if (rates)
    a.passes = resolve_by_step(spec, run, machine.gpu_bytes, choose_recompute, StepChoiceInputs{1, true, -1, *rates});
  else
    resolve_auto(spec, run, machine.gpu_bytes, choose_recompute);
  a.largest_micro_batch = std::min(a.largest_micro_batch, run.batch_size / run.passes);  // never above a pass
  a.run = run;
  a.plan = plan_memory(spec, run);
  a.host_usable_bytes = static_cast<int64_t>(static_cast<double>(machine.ram_bytes) * kHostUsableShare);
  a.largest_parameters = a.host_usable_bytes / a.plan.host.bytes_per_parameter();
  a.host_fits = a.plan.host.ram_bytes() <= a.host_usable_bytes;
  a.nvme_fits = machine.nvme_bytes < 0 || a.plan.host.nvme_bytes <= machine.nvme_bytes;
  a.nvme = nvme_timing(a.plan.host, model_flops_per_token(spec, run.seq_len), run.batch_size, run.seq_len,
                       forward_share(spec, run), machine);
  a.capacities = offload_capacities(run.stream_dtype, machine);
  a.gpu_fits = a.plan.gpu.total() <= machine.gpu_bytes;
  const auto gb = [](int64_t b) { return format_bytes(static_cast<uint64_t>(b)); };
  if (!a.host_fits)
    a.shortfall = MT_FORMAT("host RAM: the store needs {}{} but {} of {} is usable; the largest model for this RAM "
                            "has {:.2f} B parameters", gb(a.plan.host.store_bytes),
                            a.plan.host.checkpoint_bytes > 0
                                ? MT_FORMAT(" and the activation checkpoints (training.activation_checkpoints host) {}",
                                            gb(a.plan.host.checkpoint_bytes))
                                : std::string(),
                            gb(a.host_usable_bytes),
                            gb(machine.ram_bytes), static_cast<double>(a.largest_parameters) / 1e9);
  else if (!a.nvme_fits)
    a.shortfall = MT_FORMAT("NVMe: the state tier needs {} but the paths hold {}", gb(a.plan.host.nvme_bytes),
                            gb(machine.nvme_bytes));
  else if (!a.gpu_fits && !a.recommended_interval)
    a.shortfall = MT_FORMAT("GPU memory: even micro-batch 1 at every checkpoint interval needs more than {} "
                            "(weight slots alone {})", gb(machine.gpu_bytes), gb(a.plan.gpu.weight_slots));
  else if (!a.gpu_fits)
    a.shortfall = MT_FORMAT("GPU memory: the plan needs {} of {}; use checkpoint_interval {} and "
                            "micro_batch_size {}", gb(a.plan.gpu.total()), gb(machine.gpu_bytes),
                            a.recommended_interval, a.largest_micro_batch);
  return a;
}

std::vector<OffloadCapacity> offload_capacities(DType stream_dtype, const Machine& machine) {
  const int64_t usable = static_cast<int64_t>(static_cast<double>(machine.ram_bytes) * kHostUsableShare);
  std::vector<OffloadCapacity> out;
  for (OffloadMode mode : {OffloadMode::none, OffloadMode::optimizer, OffloadMode::optimizer_master}) {
    OffloadCapacity c;
    c.mode = mode;
    // optimizer+master streams the bf16 copy whatever the stream dtype asked.
    const int64_t copy = stream_dtype == DType::bf16 || offloads_master(mode) ? 2 : 0;
    c.ram_per_parameter = 4 + copy + (kind_offloaded(mode, StateKind::master) ? 0 : 4) +
                          (kind_offloaded(mode, StateKind::exp_avg) ? 0 : 8);
    c.nvme_per_parameter = offloaded_kinds(mode) * 4;
    c.largest_parameters = usable / c.ram_per_parameter;
    if (c.nvme_per_parameter > 0 && machine.nvme_bytes >= 0)
      c.largest_parameters = std::min(c.largest_parameters, machine.nvme_bytes / c.nvme_per_parameter);
    out.push_back(c);
  }
  return out;
}

double forward_share(const ModelSpec& spec, const RunShape& run) {
  const double layers = static_cast<double>(std::max<int64_t>(spec.num_layers, 1));
  const double recompute = static_cast<double>(std::clamp<int64_t>(run.recompute_layers, 0, spec.num_layers)) / layers;
  return 2.0 / (6.0 + 2.0 * recompute);
}

NvmeTiming nvme_timing(const HostPlan& host, double flops_per_token, int64_t batch, int64_t seq_len,
                       double forward_share, const Machine& machine) {
  NvmeTiming t;
  const double rate = machine.gpu_tflops * 1e12;
  t.gpu_seconds = rate > 0 ? flops_per_token * static_cast<double>(batch * seq_len) / rate : 0.0;
  t.forward_seconds = forward_share * t.gpu_seconds;
  t.nvme_seconds = nvme_step_seconds(host, machine.nvme_gbs);
  t.predicted_seconds = std::max(t.gpu_seconds, t.nvme_seconds + t.gpu_seconds - t.forward_seconds);
  if (t.nvme_seconds <= 0 || rate <= 0 || seq_len <= 0 || forward_share <= 0) return t;
  const double tokens = t.nvme_seconds * rate / (flops_per_token * forward_share);
  t.hiding_batch = static_cast<int64_t>(std::ceil(tokens / static_cast<double>(seq_len)));
  return t;
}

}  // namespace mt
