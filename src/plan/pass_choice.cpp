// The pass count by the predicted step (see pass_choice.h).
#include "plan/pass_choice.h"

#include "core/error.h"
#include "plan/step_plan.h"

namespace mt {

PassChoice resolve_by_step(const ModelSpec& spec, RunShape& run, int64_t gpu_bytes, bool auto_recompute,
                           const StepChoiceInputs& inputs) {
  const RunShape given = run;
  resolve_auto(spec, run, gpu_bytes, auto_recompute);
  PassChoice choice;
  choice.passes = choice.memory_passes = run.passes;
  if (given.passes != 0 || gpu_bytes <= 0) return choice;
  const std::vector<int64_t> candidates = auto_pass_candidates(given);
  if (candidates.size() < 2) return choice;
  const ParamLayout layout = make_param_layout(spec);
  const auto predicted = [&](const RunShape& r) {
    return plan_step(spec, r, gpu_bytes, inputs.gpu_ranks, inputs.resident_enabled, inputs.forced_keep, inputs.rates,
                     auto_recompute).step.step_s;
  };
  const double memory_step = predicted(run);
  choice.steps_by_passes.emplace_back(run.passes, memory_step);
  RunShape best = run;
  double best_step = memory_step;
  for (const int64_t p : candidates) {
    if (p == choice.memory_passes) continue;
    RunShape r = given;
    r.passes = p;
    resolve_auto(spec, r, gpu_bytes, auto_recompute);
    if (plan_gpu(spec, layout, r).total() > usable_gpu_bytes(gpu_bytes)) continue;
    const double step = predicted(r);
    choice.steps_by_passes.emplace_back(p, step);
    if (step < best_step) {
      best = r;
      best_step = step;
    }
  }
  if (best_step < (1.0 - kRecomputeGain) * memory_step) {
    run = best;
    choice.passes = best.passes;
  }
  return choice;
}

std::string describe_pass_choice(const PassChoice& choice) {
  if (choice.passes == choice.memory_passes) return {};
  std::string weighed;
  for (const auto& [passes, step] : choice.steps_by_passes)
    weighed += MT_FORMAT("{}{} {:.3f} s", weighed.empty() ? "" : ", ", passes, step);
  return MT_FORMAT("{} gradient accumulation pass(es), not the {} that recompute the fewest layers: the shorter "
                   "predicted step (by passes: {})", choice.passes, choice.memory_passes, weighed);
}

}  // namespace mt
