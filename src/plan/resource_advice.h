// Sizing advice from the memory plan: does a run fit a machine (GPU memory, host RAM), the largest model the
// RAM holds, the largest micro-batch the GPU holds, and the recommended checkpoint_interval / micro_batch_size /
// recompute_layers.
// Invariant: every figure comes from plan_memory (memory_plan.h), the same plan train's preflight checks.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "plan/memory_plan.h"
#include "plan/pass_choice.h"

namespace mt {

// Share of host RAM the store may take; the rest is left to the OS, data, tokenizer and the process itself.
inline constexpr double kHostUsableShare = 0.9;

struct Machine {
  int64_t gpu_bytes = 0;
  int64_t ram_bytes = 0;
  int64_t nvme_bytes = -1;       // capacity of the state tier's paths together; -1 unknown (not checked)
  double nvme_gbs = 0.0;         // their aggregate bandwidth, GB/s (reads and writes together); 0 unknown
  double gpu_tflops = 450.0;     // the GPU's sustained training rate in model FLOPs (model/flops.h: matmuls and
                                 // attention): the H200 measured 440-640 (docs/PERFORMANCE.md)
};

// What each offload mode allows on a machine: the largest model its RAM (and NVMe capacity) holds.
struct OffloadCapacity {
  OffloadMode mode = OffloadMode::none;
  int64_t ram_per_parameter = 0, nvme_per_parameter = 0;
  int64_t largest_parameters = 0;
};
std::vector<OffloadCapacity> offload_capacities(DType stream_dtype, const Machine& machine);

// The step time the NVMe state traffic imposes against the GPU's compute. The optimizer of step k streams the tier
// after step k's backward (it needs the global norm) and publishes region by region for step k+1's forward, whose
// backward then waits for every region: the traffic overlaps the next forward only, the share forward_share of the
// GPU's step (2 of 6N FLOPs, plus 2N for each recomputing layer's share: 2 / (6 + 2 × recompute share)).
// gpu_seconds is the step's model FLOPs (flops_per_token · tokens: model_flops_per_token, which counts the active
// parameters and attention, so that long sequences and mixtures of experts are timed as they compute) at
// machine.gpu_tflops; the predicted step is the GPU's, or the traffic plus the GPU's part that cannot overlap it;
// hiding_batch is the batch (sequences of seq_len) from which the forward covers the traffic.
struct NvmeTiming {
  double nvme_seconds = 0.0, gpu_seconds = 0.0, forward_seconds = 0.0;
  double predicted_seconds = 0.0;
  int64_t hiding_batch = 0;      // 0: nothing to hide (no offload) or bandwidth unknown
};
double forward_share(const ModelSpec& spec, const RunShape& run);
NvmeTiming nvme_timing(const HostPlan& host, double flops_per_token, int64_t batch, int64_t seq_len,
                       double forward_share, const Machine& machine);

struct ResourceAdvice {
  RunShape run;                          // the shape evaluated (interval and micro-batch resolved)
  MemoryPlan plan;                       // plan_memory(spec, run)
  int64_t host_usable_bytes = 0;
  int64_t largest_parameters = 0;        // at the run's bytes per parameter
  int64_t largest_micro_batch = 0;       // sequences at the recommended interval; 0: not even 1 fits
  int64_t recommended_interval = 0;      // smallest checkpoint_interval with micro-batch 1 fitting; 0: none
  bool host_fits = false, gpu_fits = false, nvme_fits = true;
  NvmeTiming nvme;
  std::vector<OffloadCapacity> capacities;
  std::string shortfall;                 // empty when the run fits
  PassChoice passes;                     // how the pass count was chosen (with rates)
  bool fits() const { return host_fits && gpu_fits && nvme_fits; }
};

// run.checkpoint_interval 0 = choose: the plan is then evaluated at the recommended interval. The interval and
// micro-batch are chosen with run.recompute_layers as given; then resolve_auto (choose_recompute: fill the GPU
// with saved layers), with the pass count by the predicted step at `rates` where given (plan/pass_choice.h, as one
// GPU rank of train with optimizer_on_gpu and moe_keep_layers auto plans it).
ResourceAdvice advise(const ModelSpec& spec, RunShape run, const Machine& machine, bool choose_recompute = false,
                      const StepRates* rates = nullptr);

}  // namespace mt
