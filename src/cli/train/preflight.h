// Preflight of `train`: before the host store exists, the memory plan (plan/memory_plan.h) against what the
// machine has — MemAvailable, each NUMA domain's free memory against its ranks' slices, the shared-memory filesystem, RLIMIT_MEMLOCK where the CUDA backend page-locks
// the store, the GPU's memory. Invariant: a run that cannot fit stops here with one line naming the shortfall
// and the calc-resource command that sizes it, before any large allocation or output directory.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "config/config.h"
#include "model/model_spec.h"
#include "plan/memory_plan.h"
#include "plan/pass_choice.h"
#include "plan/step_bound.h"

namespace mt {

struct MachineLimits {
  int64_t mem_available = -1;      // bytes; -1 unknown
  std::string shm_dir;
  int64_t shm_free = -1;           // bytes; -1 unknown
  int64_t memlock = -1;            // bytes of RLIMIT_MEMLOCK; -1 unlimited or not binding (CAP_IPC_LOCK)
  int64_t gpu_bytes = 0;           // device memory; 0 without a GPU backend
  // Per NUMA domain with CPUs, in dist::plan_rank_share's order (empty: one domain, or the launcher binds):
  std::vector<int> numa_os_index, numa_cores;
  std::vector<int64_t> numa_free;  // MemFree + FilePages of the domain's node, bytes
};

// The shape one GPU of train runs with (2 GPU weight slots): with data parallelism over `gpus` GPU ranks, each
// holds about batch_size / gpus sequences (their token-balanced share). recompute_layers auto reads as all
// layers (the leanest plan); preflight resolves it for the GPU.
RunShape run_shape(const Config& c, int ranks, int gpus = 1);
// The first shortfall of `plan` (run on a GPU backend when `gpu`) against `limits`; empty when it fits.
std::string preflight_shortfall(const ModelSpec& spec, const RunShape& run, bool gpu, const MachineLimits& limits);
MachineLimits read_machine_limits(const Backend& backend);
// Throws mt::Error naming the config, the model, the length and the limit when dataset.max_seq_len exceeds the
// model's positions (plan/sequence_limit.h: model_position_limit) or one sequence of it does not fit the GPU.
void require_sequence_fits(const Config& c, const ModelSpec& spec, const RunShape& run, const Backend& backend);
// Throws mt::Error: the shortfall and `megatrain calc-resource ...` for this model and shape. Returns the
// checked shape, micro_batch_size and recompute_layers resolved where auto (plan/memory_plan.h: resolve_auto).
// `rates`: the run's (Run::rates), for the MoE line's step bound and the pass count (plan/pass_choice.h:
// resolve_by_step, where gradient_accumulation_steps is auto), which `passes` receives where given.
RunShape preflight(const Config& c, const ModelSpec& spec, const Backend& backend, int ranks, int gpus = 1,
                   const StepRates& rates = {}, PassChoice* passes = nullptr);

}  // namespace mt
