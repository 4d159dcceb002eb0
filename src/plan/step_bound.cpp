// Compute- against transfer- and optimizer-bound tokens per step (see step_bound.h).
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
  b.flops_per_token = step_flops(spec, layout, 1, run.seq_len).model;
  const int64_t recompute = std::min(run.recompute_layers, spec.num_layers);
  const bool tied = layout.head.lm_head < 0;
  const auto stream = static_cast<double>(dtype_size(run.stream_dtype));
  for (const int64_t r : pass_region_order(spec.num_layers, std::max<int64_t>(run.checkpoint_interval, 1), tied,
                                           recompute))
    b.h2d_bytes_per_pass += static_cast<double>(layout.regions[static_cast<size_t>(r)].numel) * stream;
  b.d2h_bytes_per_pass = static_cast<double>(layout.total_numel) * 4.0;
  b.transfer_seconds_per_pass = std::max(b.h2d_bytes_per_pass, b.d2h_bytes_per_pass) / rates.pcie_bytes;
  b.optimizer_seconds = static_cast<double>(layout.total_numel) / rates.optimizer_params;
  const double tokens_per_second = rates.gpu_flops / b.flops_per_token;
  b.pcie_bound_tokens = static_cast<int64_t>(std::ceil(b.transfer_seconds_per_pass * tokens_per_second));
  b.optimizer_bound_tokens = static_cast<int64_t>(std::ceil(b.optimizer_seconds * tokens_per_second));
  const double covering = 1.25 * static_cast<double>(std::max(b.pcie_bound_tokens, b.optimizer_bound_tokens));
  const int64_t seq = std::max<int64_t>(run.seq_len, 1);
  b.recommended_batch = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(covering / static_cast<double>(seq))));
  const int64_t pass_seqs = static_cast<int64_t>(std::ceil(1.25 * static_cast<double>(b.pcie_bound_tokens) / static_cast<double>(seq)));
  b.recommended_passes = std::max<int64_t>(1, b.recommended_batch / std::max<int64_t>(pass_seqs, 1));
  return b;
}

}  // namespace mt
