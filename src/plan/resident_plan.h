// The GPU-resident optimizer state of a run (optim/resident_regions.h, kernels/runtime/resident_regions.h): how many of
// the store's leading regions keep their fp32 master, Adam moments and gradient in the GPU memory that the rest of
// the plan leaves free, so that the GPU updates them and the CPU's parameters pass, which the next forward waits
// for, covers only the regions after them.
// Invariant: the figures mirror CudaResidentRegions' allocations (16 B per parameter, + 2 for the bf16 weights of a
// bf16 backend); the count is 0 wherever the engine cannot hold state on the GPU (no GPU, several ranks on the
// node sharing the store, data parallelism, the NVMe tier, or training.optimizer_on_gpu off).
#pragma once
#include <cstdint>
#include <string>

#include "model/model_spec.h"
#include "model/param_layout.h"
#include "plan/memory_plan.h"
#include "plan/step_bound.h"

namespace mt {

// GPU memory kept free beside the plan and the resident state (allocator fragmentation, library handles).
inline constexpr int64_t kResidentMargin = int64_t{2} << 30;

int64_t resident_bytes_per_parameter(DType dtype);

struct ResidentPlan {
  int64_t regions = 0;     // the store's regions [0, regions)
  int64_t parameters = 0;  // their parameters
  int64_t bytes = 0;       // their GPU memory
  int64_t cudnn_call_batch = 0;  // RunShape::cudnn_call_batch lowered to make room for them (0: the run's)
};

// The state of the layout's first `regions` regions on the GPU.
ResidentPlan resident_prefix(const ParamLayout& layout, DType dtype, int64_t regions);
// A run's resident state on a GPU of gpu_bytes, after resolve_auto: the most leading regions whose state fits the
// usable memory beside plan_gpu of the run with them resident (its slots then serve only the other regions) and
// kResidentMargin. cuDNN's backward is split into calls of half as many sequences, then half again, where the
// workspace that frees holds more regions and the predicted step (plan/step_time.h) is shorter: a call of fewer
// sequences is slower, a region updated on the GPU streams nothing and leaves the host's parameters pass. None where
// `enabled` is false, gpu_bytes is 0, run.ranks > 1, gpu_ranks > 1 or the state tier is on. `rates`: the machine's
// (plan/step_rates.h).
ResidentPlan plan_resident(const ModelSpec& spec, const RunShape& run, int64_t gpu_bytes, int gpu_ranks, bool enabled,
                           const StepRates& rates = {});
// The run with the plan's regions resident and its cuDNN calls.
RunShape with_resident(const RunShape& run, const ResidentPlan& plan);
// One line for the log: which regions, how many of the parameters, how much GPU memory.
std::string describe_resident(const ResidentPlan& plan, const ParamLayout& layout);

}  // namespace mt
