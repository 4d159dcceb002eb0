// Compute- against transfer- and optimizer-bound tokens per pass (see step_bound.h).
#include "plan/step_bound.h"

#include <algorithm>
#include <cmath>

#include "engine/engine.h"
#include "model/flops.h"
#include "model/param_layout.h"

namespace mt {

StepBound step_bound(const ModelSpec& spec, const RunShape& run, const StepRates& rates) {
  StepBound b;
  const ParamLayout layout = make_param_layout(spec);
  const std::vector<double> flops = region_flops_per_token(spec, layout, run.seq_len);
  for (const double f : flops) b.flops_per_token += f;
  const int64_t recompute = std::min(run.recompute_layers, spec.num_layers);
  const bool tied = layout.head.lm_head < 0;
  const auto stream = static_cast<double>(dtype_size(run.stream_dtype));
  for (const int64_t r : pass_region_order(spec.num_layers, std::max<int64_t>(run.checkpoint_interval, 1), tied,
                                           recompute))
    b.h2d_bytes_per_pass += static_cast<double>(layout.regions[static_cast<size_t>(r)].numel) * stream;
  b.d2h_bytes_per_pass = static_cast<double>(layout.total_numel) * 4.0;
  b.transfer_seconds_per_pass = std::max(b.h2d_bytes_per_pass, b.d2h_bytes_per_pass) / rates.pcie_bytes;
  const double tokens_per_second = rates.gpu_flops / b.flops_per_token;
  b.pcie_bound_tokens = static_cast<int64_t>(std::ceil(b.transfer_seconds_per_pass * tokens_per_second));
  // The first pass, region by region in forward order: ready once the parameters pass is through it and its copy
  // has crossed; reached after the forward (a third of the FLOPs) of the regions before it. The pass waits for the
  // largest shortfall; the host regions before any compute (a prefix) are waited for at any batch, and enough
  // tokens bring every other shortfall within theirs.
  const double pass_tokens = static_cast<double>(run.batch_size / std::max<int64_t>(run.passes, 1) * run.seq_len);
  double updated = 0, forward_flops_before = 0, bound_tokens = 0;
  for (size_t r = 0; r < layout.regions.size(); ++r) {
    if (static_cast<int64_t>(r) >= run.resident_regions) {
      const auto numel = static_cast<double>(layout.regions[r].numel);
      updated += numel / (rates.parameters_pass_params * static_cast<double>(std::max(run.ranks, 1)));
      const double ready = updated + numel * stream / rates.pcie_bytes;
      if (forward_flops_before == 0)
        b.unhidden_wait_seconds = std::max(b.unhidden_wait_seconds, ready);
      else
        bound_tokens = std::max(bound_tokens, (ready - b.unhidden_wait_seconds) * rates.gpu_flops / forward_flops_before);
      b.first_pass_wait_seconds =
          std::max(b.first_pass_wait_seconds, ready - pass_tokens * forward_flops_before / rates.gpu_flops);
    }
    forward_flops_before += flops[r] / 3.0;
  }
  b.parameters_pass_seconds = updated;
  b.optimizer_bound_tokens = static_cast<int64_t>(std::ceil(bound_tokens));
  return b;
}

}  // namespace mt
