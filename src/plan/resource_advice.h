// Sizing advice from the memory plan: does a run fit a machine (GPU memory, host RAM), the largest model the
// RAM holds, the largest micro-batch the GPU holds, and the recommended checkpoint_interval / micro_batch_size /
// recompute_layers.
// Invariant: every figure comes from plan_memory (memory_plan.h), the same plan train's preflight checks.
#pragma once
#include <cstdint>
#include <string>

#include "plan/memory_plan.h"

namespace mt {

// Share of host RAM the store may take; the rest is left to the OS, data, tokenizer and the process itself.
inline constexpr double kHostUsableShare = 0.9;

struct Machine {
  int64_t gpu_bytes = 0;
  int64_t ram_bytes = 0;
};

struct ResourceAdvice {
  RunShape run;                          // the shape evaluated (interval and micro-batch resolved)
  MemoryPlan plan;                       // plan_memory(spec, run)
  int64_t host_usable_bytes = 0;
  int64_t largest_parameters = 0;        // at the run's bytes per parameter
  int64_t largest_micro_batch = 0;       // sequences at the recommended interval; 0: not even 1 fits
  int64_t recommended_interval = 0;      // smallest checkpoint_interval with micro-batch 1 fitting; 0: none
  bool host_fits = false, gpu_fits = false;
  std::string shortfall;                 // empty when the run fits
  bool fits() const { return host_fits && gpu_fits; }
};

// run.checkpoint_interval 0 = choose: the plan is then evaluated at the recommended interval. The interval and
// micro-batch are chosen with run.recompute_layers as given; then resolve_auto (choose_recompute: fill the GPU
// with saved layers).
ResourceAdvice advise(const ModelSpec& spec, RunShape run, const Machine& machine, bool choose_recompute = false);

}  // namespace mt
