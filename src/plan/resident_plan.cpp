// The GPU-resident prefix of the store (see resident_plan.h).
#include "plan/resident_plan.h"

#include "core/error.h"
#include "store/shared_memory_check.h"

namespace mt {

int64_t resident_bytes_per_parameter(DType dtype) { return 16 + (dtype == DType::bf16 ? 2 : 0); }

ResidentPlan resident_prefix(const ParamLayout& layout, DType dtype, int64_t free_bytes, bool single_pass) {
  ResidentPlan p;
  const int64_t per = resident_bytes_per_parameter(dtype);
  int64_t taken = 0;  // net of the sink buffers it replaces
  for (size_t r = 0; r < layout.regions.size(); ++r) {
    const Region& region = layout.regions[r];
    const bool own_buffer = r == 0 || r + 1 == layout.regions.size();
    const int64_t cost = region.numel * (per - (single_pass && own_buffer ? 4 : 0));
    if (taken + cost > free_bytes) break;
    taken += cost;
    p.bytes += region.numel * per;
    p.parameters += region.numel;
    ++p.regions;
  }
  return p;
}

ResidentPlan plan_resident(const ModelSpec& spec, const RunShape& run, int64_t gpu_bytes, int gpu_ranks, bool enabled) {
  if (!enabled || gpu_bytes <= 0 || run.ranks > 1 || gpu_ranks > 1 || run.offload != OffloadMode::none) return {};
  const int64_t free = usable_gpu_bytes(gpu_bytes) - plan_gpu(spec, run).total() - kResidentMargin;
  return resident_prefix(make_param_layout(spec), run.dtype, free, run.passes == 1);
}

std::string describe_resident(const ResidentPlan& plan, const ParamLayout& layout) {
  const auto layers = static_cast<int64_t>(layout.regions.size()) - 2;  // regions: embedding, layers, head
  const int64_t last = plan.regions - 1;
  const std::string which = last == 0            ? std::string("the embedding")
                            : last <= layers     ? MT_FORMAT("the embedding and layers 0-{}", last - 1)
                                                 : std::string("every region (embedding, layers, head)");
  return MT_FORMAT("optimizer state of {} ({:.3f} B of {:.3f} B parameters) in {} of GPU memory, updated on the GPU",
                   which, static_cast<double>(plan.parameters) / 1e9, static_cast<double>(layout.total_numel) / 1e9,
                   format_bytes(static_cast<uint64_t>(plan.bytes)));
}

}  // namespace mt
