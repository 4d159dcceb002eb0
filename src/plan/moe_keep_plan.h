// Which MoE layers keep their expert activations from forward to backward (engine/moe_block.h MoeKept) instead of
// recomputing them, chosen with the GPU-resident optimizer state (plan/resident_plan.h) by predicted step time.
// A keeping layer saves its backward's recompute: the router GEMM, the experts' gate and up GEMMs, and the shared
// expert's gate and up (a gated one's down projection and logit too), at the GPU's model FLOP rate; it costs its
// kept bytes (moe_kept_bytes × the pass's tokens), which the resident state may then lack, and a region that no
// longer fits resident lengthens the first pass's wait for the host optimizer (plan/step_bound.h). Of the counts
// whose plan fits beside the rest (after resolve_auto: micro-batch, passes, recompute_layers), the plan takes the
// one with the least predicted recompute + wait, the most keeping on a tie.
// Invariant: the counts are of the last MoE layers (moe_layer_keeps); none keep where nothing is decided on a GPU
// (gpu_bytes 0) unless forced.
#pragma once
#include <cstdint>
#include <string>

#include "model/model_spec.h"
#include "plan/memory_plan.h"
#include "plan/resident_plan.h"
#include "plan/step_bound.h"

namespace mt {

// Model FLOPs per token that layer `layer`'s backward recomputes when it does not keep (0 for a dense layer).
double moe_recompute_flops_per_token(const ModelSpec& spec, int64_t layer);

struct MoeKeepPlan {
  int64_t layers = 0;             // MoE layers that keep (the last ones)
  int64_t moe_layers = 0;         // of the model's
  bool forced = false;            // training.moe_keep_layers / --moe-keep-layers gave the count
  int64_t kept_bytes = 0;         // GPU bytes of their kept activations (GpuPlan::moe_kept)
  ResidentPlan resident;          // the resident optimizer state beside them
  double recompute_seconds = 0;   // predicted per step: the recompute of the MoE layers that do not keep
  double wait_seconds = 0;        // predicted: the step's first pass waiting for the host optimizer
  double saved_seconds = 0;       // predicted per step: the recompute the keeping layers save
  double none_wait_seconds = 0;   // predicted: the first pass's wait had none kept (the plan's choice only)
};

// The MoE layers that keep for a run resolved by resolve_auto on a GPU of gpu_bytes, and the resident state beside
// them (plan_resident's arguments); `forced` >= 0 takes that count (at most the MoE layers) as given.
MoeKeepPlan plan_moe_keep(const ModelSpec& spec, const RunShape& run, int64_t gpu_bytes, int gpu_ranks,
                          bool resident_enabled, int64_t forced = -1, const StepRates& rates = {});
// The run with the plan's keeping MoE layers and resident state.
RunShape with_moe_keep(const RunShape& run, const MoeKeepPlan& plan);
// One line for the log: how many MoE layers keep, their memory, and the predicted times it was chosen by (the
// plan's choice: the recompute it saves against the wait it adds over keeping none).
std::string describe_moe_keep(const MoeKeepPlan& plan);

}  // namespace mt
