// The gradient accumulation passes by the predicted step. resolve_auto's memory rule takes, of the pass counts that
// divide the batch and leave each pass kAutoPassTokens tokens, the one that recomputes the fewest layers; but every
// pass after the first moves each streamed region's gradient both ways (the host's sum in, the total out) and streams
// the weights again, which a shorter recompute may not repay: Qwen3-30B-A3B, 10 layers, 64 × 4096 on an H100 runs 4
// passes with no layer recomputing where one pass recomputes 6 (predicted 7.30 s against 4.92 s). With passes auto on a
// GPU, resolve_by_step resolves every candidate count as resolve_auto does, plans each as the run will
// (plan_step: MoE layers keeping, resident state, the recompute count where it is the plan's) and takes the count
// of least predicted step where it is kRecomputeGain shorter than the memory rule's (the model's differences below
// that are within its error). The pass count changes only the rounding of the gradient sums (tests/engine:
// "micro-batches and passes change only the rounding").
// Invariant: a given pass count (passes > 0) and the CPU backend (gpu_bytes 0) resolve exactly as resolve_auto.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/model_spec.h"
#include "plan/memory_plan.h"
#include "plan/step_rates.h"

namespace mt {

// What the run's plan weighs beside the passes (plan_step's arguments).
struct StepChoiceInputs {
  int gpu_ranks = 1;
  bool resident_enabled = true;  // training.optimizer_on_gpu auto
  int64_t forced_keep = -1;      // training.moe_keep_layers (-1: auto)
  StepRates rates;
};

struct PassChoice {
  int64_t passes = 0;         // the resolved run's
  int64_t memory_passes = 0;  // the memory rule's (resolve_auto)
  // Each candidate count that fits and its predicted step (the memory rule's first); empty where nothing was weighed.
  std::vector<std::pair<int64_t, double>> steps_by_passes;
};

// resolve_auto, with the pass count (where auto, on a GPU) chosen by the predicted step.
PassChoice resolve_by_step(const ModelSpec& spec, RunShape& run, int64_t gpu_bytes, bool auto_recompute,
                           const StepChoiceInputs& inputs);
// One line for the log where the choice is not the memory rule's: the passes, the memory rule's, and the predicted
// step of each count weighed; empty otherwise.
std::string describe_pass_choice(const PassChoice& choice);

}  // namespace mt
