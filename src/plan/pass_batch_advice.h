// The batch a pass the plan recommends: the fewest sequences of run.seq_len in one pass, a power of two, from which
// the predicted step (plan/step_time.h), with the plan's choices at that batch (resolve_auto, then the MoE layers
// that keep and the resident optimizer state beside them: plan_step), spends at most kComputeBoundWaitShare of it
// outside the compute (waiting for copies and the host's optimizer, the resident update): where a run turns
// compute-bound on the machine. Powers of two: each batch weighed is a whole plan.
// Invariant: the choices are those train and bench make for such a run; none (0) on the CPU backend (gpu_bytes 0).
#pragma once
#include <cstdint>

#include "model/model_spec.h"
#include "plan/memory_plan.h"
#include "plan/step_bound.h"
#include "plan/step_time.h"

namespace mt {

// The H200's Qwen3-30B-A3B (10 layers) at 64 × 4096 ran at 427-451 model TFLOP/s with its compute stream busy
// 0.95-0.99 of the step (docs/PERFORMANCE.md, thirteenth and fourteenth sessions): compute-bound enough.
inline constexpr double kComputeBoundWaitShare = 0.05;

struct PassBatchAdvice {
  int64_t batch = 0;  // sequences a pass; 0: none up to the search's limit (or the CPU backend)
  StepTime step;      // the predicted step at that batch, in one pass
};

// Over one-pass runs of `run` (its sequence length, dtypes, switches; the batch and what resolve_auto resolves
// replaced) on a GPU of gpu_bytes, up to max_batch sequences.
PassBatchAdvice advise_pass_batch(const ModelSpec& spec, const RunShape& run, int64_t gpu_bytes,
                                  const StepRates& rates, int64_t max_batch = 4096);

}  // namespace mt
