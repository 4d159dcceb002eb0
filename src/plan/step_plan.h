// The choices a resolved run leaves to the predicted step (plan/step_time.h), made jointly: which MoE layers keep
// their expert activations from forward to backward (engine/moe_block.h MoeKept) instead of recomputing them, the
// GPU-resident optimizer state (plan/resident_plan.h), and (recompute_layers auto) how many layers recompute; the pass
// count is chosen around it (plan/pass_choice.h). A keeping layer saves its backward's recompute (the router, the experts' gate and up GEMMs, the
// shared expert's gate and up); it costs its kept bytes (moe_kept_bytes × the pass's tokens), which the resident
// state may then lack: a region that no longer fits resident streams every pass (and its gradient crosses back),
// the host's parameters pass covers it, and plan_resident may split cuDNN's backward differently. The predicted step
// weighs all of it. Of the counts whose plan fits beside the rest (after resolve_auto: micro-batch, passes,
// recompute_layers), the plan takes the one of least predicted step, the most keeping on a tie.
// Where the recompute count is the plan's too (training.recompute_layers auto), more layers recomputing free their
// saved activations for resident state, which spares the host's parameters pass and the copies; the predicted step
// weighs that against the recompute's compute (Qwen2.5-3B at 32 × 1024 on an H100: 12 layers recomputing with the
// state they make room for, 1.240 s predicted, against the 2 that fit, 1.394 s): from resolve_auto's count (the
// fewest that fit) to every layer, in steps of a twelfth of the layers, the least predicted step, taken only where it
// is kRecomputeGain shorter than the fewest's (the model's differences below that are within its error).
// Invariant: the counts are of the last MoE layers (moe_layer_keeps); none keep where nothing is decided on a GPU
// (gpu_bytes 0) unless forced; the recompute count only grows from the run's, and only where choose_recompute.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/model_spec.h"
#include "plan/memory_plan.h"
#include "plan/resident_plan.h"
#include "plan/step_bound.h"
#include "plan/step_time.h"

namespace mt {

inline constexpr double kRecomputeGain = 0.02;

struct StepPlan {
  int64_t layers = 0;             // MoE layers that keep (the last ones)
  int64_t moe_layers = 0;         // of the model's
  bool forced = false;            // training.moe_keep_layers / --moe-keep-layers gave the count
  int64_t kept_bytes = 0;         // GPU bytes of their kept activations (GpuPlan::moe_kept)
  ResidentPlan resident;          // the resident optimizer state beside them
  int64_t recompute_layers = -1;  // the layers recomputing with them (-1: the run's, where not the plan's to choose)
  StepTime step;                  // the predicted step with them (none on the CPU backend: gpu_bytes 0)
  // Where the plan chose more layers recomputing than the run's (memory's): the predicted step with the run's count
  // and its own best keep and resident state, which `step` beat by kRecomputeGain or more (0 otherwise).
  double memory_recompute_step_s = 0;
  // The predicted step of each count the plan weighed, from 0 (keeping none) to the last that fits; the plan's
  // choice only.
  std::vector<double> steps_by_count;
};

// The MoE layers that keep for a run resolved by resolve_auto on a GPU of gpu_bytes, and the resident state beside
// them (plan_resident's arguments); `forced` >= 0 takes that count (at most the MoE layers) as given.
// choose_recompute: run.recompute_layers is resolve_auto's, and more may recompute where the step is shorter.
StepPlan plan_step(const ModelSpec& spec, const RunShape& run, int64_t gpu_bytes, int gpu_ranks,
                   bool resident_enabled, int64_t forced = -1, const StepRates& rates = {},
                   bool choose_recompute = false);
// The run with the plan's keeping MoE layers, resident state and (where it chose them) recomputing layers.
RunShape with_step_plan(const RunShape& run, const StepPlan& plan);
// One line for the log: how many MoE layers keep, their memory, the predicted step, and (the plan's choice) the
// predicted steps of the counts it was chosen over.
std::string describe_step_plan(const StepPlan& plan);

}  // namespace mt
