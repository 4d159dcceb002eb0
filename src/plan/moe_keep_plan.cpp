// The MoE layers that keep their expert activations (see moe_keep_plan.h).
#include "plan/moe_keep_plan.h"

#include <algorithm>

#include "core/error.h"
#include "engine/moe_block.h"
#include "store/shared_memory_check.h"

namespace mt {

double moe_recompute_flops_per_token(const ModelSpec& spec, int64_t layer) {
  const MoeSpec& m = spec.layers[static_cast<size_t>(layer)].moe;
  if (!m.active()) return 0.0;
  const auto H = static_cast<double>(spec.hidden_size);
  const auto S = static_cast<double>(m.shared_intermediate_size);
  double flops = 2.0 * H * static_cast<double>(m.num_experts);                                  // router
  flops += 2.0 * 2.0 * H * static_cast<double>(m.top_k) * static_cast<double>(m.intermediate_size);  // gate, up
  flops += 2.0 * 2.0 * H * S;                                                                      // shared gate, up
  if (m.shared_intermediate_size > 0 && m.shared_gate) flops += 2.0 * S * H + 2.0 * H;             // its down, logit
  return flops;
}

MoeKeepPlan plan_moe_keep(const ModelSpec& spec, const RunShape& run, int64_t gpu_bytes, int gpu_ranks,
                          bool resident_enabled, int64_t forced, const StepRates& rates) {
  const int64_t moe_layers = moe_layer_count(spec);
  const double step_tokens = static_cast<double>(run.batch_size) * static_cast<double>(run.seq_len);
  const auto evaluate = [&](int64_t k) {
    MoeKeepPlan p;
    p.layers = k;
    p.moe_layers = moe_layers;
    p.forced = forced >= 0;
    RunShape with = run;
    with.moe_keep_layers = k;
    p.kept_bytes = plan_gpu(spec, with).moe_kept;
    p.resident = plan_resident(spec, with, gpu_bytes, gpu_ranks, resident_enabled, rates);
    for (int64_t i = 0; i < spec.num_layers; ++i) {
      const double seconds = moe_recompute_flops_per_token(spec, i) * step_tokens / rates.gpu_flops;
      (moe_layer_keeps(spec, i, k) ? p.saved_seconds : p.recompute_seconds) += seconds;
    }
    if (gpu_bytes > 0) p.wait_seconds = step_bound(spec, with_resident(with, p.resident), rates).first_pass_wait_seconds;
    return p;
  };
  if (forced >= 0) return evaluate(std::min(forced, moe_layers));
  MoeKeepPlan best = evaluate(0);
  const double none_wait = best.wait_seconds;
  best.none_wait_seconds = none_wait;
  if (gpu_bytes <= 0) return best;
  for (int64_t k = 1; k <= moe_layers; ++k) {
    RunShape with = run;
    with.moe_keep_layers = k;
    if (plan_gpu(spec, with).total() > usable_gpu_bytes(gpu_bytes)) break;  // each more layer only adds bytes
    const MoeKeepPlan p = evaluate(k);
    if (p.recompute_seconds + p.wait_seconds <= best.recompute_seconds + best.wait_seconds) best = p;
  }
  best.none_wait_seconds = none_wait;
  return best;
}

RunShape with_moe_keep(const RunShape& run, const MoeKeepPlan& plan) {
  RunShape r = with_resident(run, plan.resident);
  r.moe_keep_layers = plan.layers;
  return r;
}

std::string describe_moe_keep(const MoeKeepPlan& plan) {
  return MT_FORMAT("{} of {} MoE layers keep their expert activations ({} of GPU memory{}); predicted per step: {:.3f} s "
                   "recomputing the other layers' routers and expert GEMMs, {:.3f} s saved, the first pass waiting "
                   "{:.3f} s for the host optimizer{}", plan.layers, plan.moe_layers,
                   format_bytes(static_cast<uint64_t>(plan.kept_bytes)), plan.forced ? ", as asked" : ", the plan's",
                   plan.recompute_seconds, plan.saved_seconds, plan.wait_seconds,
                   plan.forced || plan.layers == 0
                       ? std::string()
                       : MT_FORMAT(" (chosen over keeping none: {:.3f} s saved recomputing against {:.3f} s more "
                                   "waiting)", plan.saved_seconds, plan.wait_seconds - plan.none_wait_seconds));
}

}  // namespace mt
