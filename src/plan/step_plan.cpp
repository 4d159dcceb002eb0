// The run's MoE layers keeping, resident state and recompute count by the predicted step (see step_plan.h).
#include "plan/step_plan.h"

#include <algorithm>
#include <optional>

#include "core/error.h"
#include "engine/moe_block.h"
#include "store/shared_memory_check.h"

namespace mt {

namespace {

// The keep count of least predicted step for a run whose recompute count is fixed.
StepPlan best_keep(const ModelSpec& spec, const ParamLayout& layout, const RunShape& run, int64_t gpu_bytes,
                   int gpu_ranks, bool resident_enabled, int64_t forced, const StepRates& rates) {
  const int64_t moe_layers = moe_layer_count(spec);
  const auto evaluate = [&](int64_t k) {
    StepPlan p;
    p.layers = k;
    p.moe_layers = moe_layers;
    p.forced = forced >= 0;
    RunShape with = run;
    with.moe_keep_layers = k;
    p.kept_bytes = plan_gpu(spec, layout, with).moe_kept;
    p.resident = plan_resident(spec, with, gpu_bytes, gpu_ranks, resident_enabled, rates);
    if (gpu_bytes > 0) p.step = predict_step_time(spec, layout, with_resident(with, p.resident), rates);
    return p;
  };
  if (forced >= 0) return evaluate(std::min(forced, moe_layers));
  StepPlan best = evaluate(0);
  if (gpu_bytes <= 0 || moe_layers == 0) return best;
  std::vector<double> steps = {best.step.step_s};
  for (int64_t k = 1; k <= moe_layers; ++k) {
    RunShape with = run;
    with.moe_keep_layers = k;
    if (plan_gpu(spec, layout, with).total() > usable_gpu_bytes(gpu_bytes)) break;  // each more layer only adds bytes
    const StepPlan p = evaluate(k);
    steps.push_back(p.step.step_s);
    if (p.step.step_s <= best.step.step_s) best = p;
  }
  best.steps_by_count = std::move(steps);
  return best;
}

}  // namespace

StepPlan plan_step(const ModelSpec& spec, const RunShape& run, int64_t gpu_bytes, int gpu_ranks,
                   bool resident_enabled, int64_t forced, const StepRates& rates, bool choose_recompute) {
  const ParamLayout layout = make_param_layout(spec);
  const auto at = [&](int64_t recompute) {
    RunShape with = run;
    with.recompute_layers = recompute;
    return best_keep(spec, layout, with, gpu_bytes, gpu_ranks, resident_enabled, forced, rates);
  };
  StepPlan fewest = at(run.recompute_layers);
  if (!choose_recompute || gpu_bytes <= 0) return fewest;
  fewest.recompute_layers = run.recompute_layers;
  std::optional<StepPlan> more;  // the best of more layers recomputing
  const int64_t layers = spec.num_layers, stride = std::max<int64_t>(1, layers / 12);
  for (int64_t r = run.recompute_layers + stride; r < layers + stride; r += stride) {
    const int64_t recompute = std::min(r, layers);
    StepPlan p = at(recompute);
    p.recompute_layers = recompute;
    if (!more || p.step.step_s < more->step.step_s) more = std::move(p);
  }
  if (!more || more->step.step_s >= (1.0 - kRecomputeGain) * fewest.step.step_s) return fewest;
  more->memory_recompute_step_s = fewest.step.step_s;
  return *more;
}

RunShape with_step_plan(const RunShape& run, const StepPlan& plan) {
  RunShape r = with_resident(run, plan.resident);
  r.moe_keep_layers = plan.layers;
  if (plan.recompute_layers >= 0) r.recompute_layers = plan.recompute_layers;
  return r;
}

std::string describe_step_plan(const StepPlan& plan) {
  std::string weighed;
  for (size_t k = 0; k < plan.steps_by_count.size(); ++k)
    weighed += MT_FORMAT("{}{} {:.3f} s", k == 0 ? "" : ", ", k, plan.steps_by_count[k]);
  return MT_FORMAT("{} of {} MoE layers keep their expert activations ({} of GPU memory{}); {}{}", plan.layers,
                   plan.moe_layers, format_bytes(static_cast<uint64_t>(plan.kept_bytes)),
                   plan.forced ? ", as asked" : ", the plan's", describe_step_time(plan.step),
                   weighed.empty() ? std::string() : MT_FORMAT(" (the predicted step by layers keeping: {})", weighed));
}

}  // namespace mt
