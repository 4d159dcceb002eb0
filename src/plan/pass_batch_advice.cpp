// The recommended batch a pass (see pass_batch_advice.h): the first compute-bound power of two.
#include "plan/pass_batch_advice.h"

#include "plan/step_plan.h"

namespace mt {

PassBatchAdvice advise_pass_batch(const ModelSpec& spec, const RunShape& run, int64_t gpu_bytes,
                                  const StepRates& rates, int64_t max_batch) {
  if (gpu_bytes <= 0) return {};
  // The plan of one pass of `batch` sequences, as train resolves it, and its predicted step.
  const auto at = [&](int64_t batch) {
    RunShape r = run;
    r.batch_size = batch;
    r.passes = 1;
    r.micro_batch_size = 0;
    r.moe_keep_layers = 0;
    r.resident_regions = 0;
    r.cudnn_call_batch = 0;
    resolve_auto(spec, r, gpu_bytes, true);
    return PassBatchAdvice{batch, plan_step(spec, r, gpu_bytes, 1, true, -1, rates).step};
  };
  const auto bound = [](const PassBatchAdvice& a) {
    return a.step.step_s - a.step.compute_s <= kComputeBoundWaitShare * a.step.step_s;
  };
  PassBatchAdvice found = at(1);
  while (!bound(found)) {
    if (found.batch >= max_batch) return {};
    found = at(std::min(2 * found.batch, max_batch));
  }
  return found;
}

}  // namespace mt
