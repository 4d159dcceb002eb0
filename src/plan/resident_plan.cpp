// The GPU-resident prefix of the store (see resident_plan.h).
#include "plan/resident_plan.h"

#include "core/error.h"
#include "plan/step_time.h"
#include "store/shared_memory_check.h"

namespace mt {

int64_t resident_bytes_per_parameter(DType dtype) { return 16 + (dtype == DType::bf16 ? 2 : 0); }

ResidentPlan resident_prefix(const ParamLayout& layout, DType dtype, int64_t regions) {
  ResidentPlan p;
  p.regions = std::min<int64_t>(regions, static_cast<int64_t>(layout.regions.size()));
  for (int64_t r = 0; r < p.regions; ++r) p.parameters += layout.regions[static_cast<size_t>(r)].numel;
  p.bytes = p.parameters * resident_bytes_per_parameter(dtype);
  return p;
}

ResidentPlan plan_resident(const ModelSpec& spec, const RunShape& run, int64_t gpu_bytes, int gpu_ranks, bool enabled,
                           const StepRates& rates) {
  if (!enabled || gpu_bytes <= 0 || run.ranks > 1 || gpu_ranks > 1 || run.offload != OffloadMode::none) return {};
  const ParamLayout layout = make_param_layout(spec);
  const int64_t usable = usable_gpu_bytes(gpu_bytes);
  // The most regions beside the plan at a call batch. Not monotone in the count: where the largest streamed region
  // becomes resident the slots shrink.
  const auto most = [&](int64_t call_batch) {
    ResidentPlan best;
    for (int64_t k = 1; k <= static_cast<int64_t>(layout.regions.size()); ++k) {
      RunShape with = run;
      with.resident_regions = k;
      with.cudnn_call_batch = call_batch;
      const ResidentPlan p = resident_prefix(layout, run.dtype, k);
      if (plan_gpu(spec, layout, with).total() + p.bytes + kResidentMargin <= usable) best = p;
    }
    return best;
  };
  ResidentPlan best = most(run.cudnn_call_batch);
  const GpuPlan g = plan_gpu(spec, layout, run);
  if (!g.cudnn_backward) return best;
  // cuDNN's backward in calls of half the sequences, then half again, where the workspace that frees holds more
  // regions and the predicted step is shorter (the calls slower, the regions off the stream and the host's pass).
  double best_step = predict_step_time(spec, layout, with_resident(run, best), rates).step_s;
  for (int64_t n = g.cudnn_call_batch / 2; n >= 1; n /= 2) {
    ResidentPlan p = most(n);
    p.cudnn_call_batch = n;
    if (p.regions <= best.regions) continue;
    const double step = predict_step_time(spec, layout, with_resident(run, p), rates).step_s;
    if (step < best_step) {
      best = p;
      best_step = step;
    }
  }
  return best;
}

RunShape with_resident(const RunShape& run, const ResidentPlan& plan) {
  RunShape r = run;
  r.resident_regions = plan.regions;
  if (plan.cudnn_call_batch > 0) r.cudnn_call_batch = plan.cudnn_call_batch;
  return r;
}

std::string describe_resident(const ResidentPlan& plan, const ParamLayout& layout) {
  const auto layers = static_cast<int64_t>(layout.regions.size()) - 2;  // regions: embedding, layers, head
  const int64_t last = plan.regions - 1;
  const std::string which = last == 0            ? std::string("the embedding")
                            : last == 1          ? std::string("the embedding and layer 0")
                            : last <= layers     ? MT_FORMAT("the embedding and layers 0-{}", last - 1)
                                                 : std::string("every region (embedding, layers, head)");
  return MT_FORMAT("optimizer state of {} ({:.3f} B of {:.3f} B parameters) in {} of GPU memory, updated on the GPU{}",
                   which, static_cast<double>(plan.parameters) / 1e9, static_cast<double>(layout.total_numel) / 1e9,
                   format_bytes(static_cast<uint64_t>(plan.bytes)),
                   plan.cudnn_call_batch > 0
                       ? MT_FORMAT(" (cuDNN's attention backward in calls of {} sequence(s) to make room)",
                                   plan.cudnn_call_batch)
                       : "");
}

}  // namespace mt
