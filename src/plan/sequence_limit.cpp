// The longest trainable sequence (see sequence_limit.h): a search over lengths with the memory plan.
#include "plan/sequence_limit.h"

#include <algorithm>

#include "core/error.h"
#include "model/param_layout.h"

namespace mt {

int64_t model_position_limit(const ModelSpec& spec, std::string* why) {
  int64_t limit = spec.max_position_embeddings;
  std::string source = MT_FORMAT("max_position_embeddings {}", limit);
  bool uses_rope = false;
  for (const LayerSpec& l : spec.layers) uses_rope |= !l.linear_mixer() && l.attention.rope >= 0;
  if (!uses_rope || spec.rope_tables.empty()) {
    if (why) *why = "no RoPE";
    return kNoPositionLimit;
  }
  for (const RopeSpec& r : spec.rope_tables) {
    if (r.type == "dynamic") {
      if (why) *why = "dynamic NTK RoPE scaling";
      return kNoPositionLimit;
    }
    if ((r.type == "yarn" || r.type == "longrope") && r.original_max_position_embeddings > 0) {
      const auto covered = static_cast<int64_t>(static_cast<double>(r.original_max_position_embeddings) * r.factor);
      if (covered > limit) {
        limit = covered;
        source = MT_FORMAT("{} RoPE scaling: {} × factor {}", r.type, r.original_max_position_embeddings, r.factor);
      }
    }
  }
  if (why) *why = source;
  return limit;
}

namespace {

// The leanest plan of one sequence of `tokens` with the checkpoints at `placement`, over run's checkpoint_interval or
// (0) every one, among the intervals whose host checkpoints take at most `host_room` bytes.
struct OneSequencePlan {
  int64_t gpu_bytes = std::numeric_limits<int64_t>::max();
  int64_t host_checkpoints = 0;
  int64_t interval = 0;
};
OneSequencePlan leanest_plan(const ModelSpec& spec, const ParamLayout& layout, RunShape run, int64_t tokens,
                             CheckpointPlacement placement, int64_t host_room = std::numeric_limits<int64_t>::max()) {
  run.batch_size = run.passes = run.micro_batch_size = 1;
  run.recompute_layers = spec.num_layers;
  run.seq_len = tokens;
  run.checkpoints = placement;
  const int64_t first = run.checkpoint_interval > 0 ? run.checkpoint_interval : 1;
  const int64_t last = run.checkpoint_interval > 0 ? run.checkpoint_interval : spec.num_layers;
  OneSequencePlan best;
  for (int64_t c = first; c <= last; ++c) {
    run.checkpoint_interval = c;
    const GpuPlan g = plan_gpu(spec, layout, run);
    if (g.host_checkpoints > host_room || g.total() >= best.gpu_bytes) continue;
    best = {g.total(), g.host_checkpoints, c};
  }
  return best;
}

// The longest multiple of kSequenceStep for which `fits` holds (0: not even one step); fits is monotone.
template <typename Fits>
int64_t longest_fitting(Fits fits) {
  if (!fits(1)) return 0;
  int64_t lo = 1, hi = 2;  // fits(lo); hi: the first power of two found not to fit
  while (hi < (int64_t{1} << 24) && fits(hi)) {
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo * kSequenceStep;
}

// The leanest plan of one sequence over the placements run.checkpoints allows.
OneSequencePlan leanest_placement(const ModelSpec& spec, const ParamLayout& layout, const RunShape& run, int64_t tokens) {
  OneSequencePlan best;
  for (const CheckpointPlacement p : {CheckpointPlacement::gpu, CheckpointPlacement::host}) {
    if (run.checkpoints != CheckpointPlacement::automatic && run.checkpoints != p) continue;
    const OneSequencePlan plan = leanest_plan(spec, layout, run, tokens, p);
    if (plan.gpu_bytes < best.gpu_bytes) best = plan;
  }
  return best;
}

}  // namespace

int64_t one_sequence_gpu_bytes(const ModelSpec& spec, RunShape run, int64_t tokens, int64_t* interval) {
  const OneSequencePlan best = leanest_placement(spec, make_param_layout(spec), run, tokens);
  if (interval) *interval = best.interval;
  return best.gpu_bytes;
}

SequenceLimit longest_trainable_sequence(const ModelSpec& spec, RunShape run, const Machine& machine) {
  SequenceLimit s;
  s.position_tokens = model_position_limit(spec, &s.position_source);
  const HostPlan host = plan_host(spec, run.stream_dtype, run.ranks, run.offload);
  const auto ram_usable = static_cast<int64_t>(static_cast<double>(machine.ram_bytes) * kHostUsableShare);
  s.host_fits = host.ram_bytes() <= ram_usable && (machine.nvme_bytes < 0 || host.nvme_bytes <= machine.nvme_bytes);
  const int64_t usable = usable_gpu_bytes(machine.gpu_bytes);
  if (machine.gpu_bytes <= 0) return s;
  const ParamLayout layout = make_param_layout(spec);  // one layout for the whole search (MoE layouts are large)
  run.checkpoints = CheckpointPlacement::gpu;
  // The longest multiple of kSequenceStep whose plan fits, with the backward as `cudnn_backward` says.
  auto longest = [&](bool cudnn_backward) -> int64_t {
    RunShape r = run;
    r.cudnn_backward = cudnn_backward;
    return longest_fitting(
        [&](int64_t steps) { return leanest_placement(spec, layout, r, steps * kSequenceStep).gpu_bytes <= usable; });
  };
  // Ours, or cuDNN's backward where that fits longer (in tiles it holds less than our GQA partials).
  s.memory_tokens = longest(false);
  if (run.cudnn_attention) {
    s.cudnn_backward_tokens = longest(true);
    s.memory_tokens = std::max(s.memory_tokens, s.cudnn_backward_tokens);
  }
  if (s.memory_tokens > 0) {
    RunShape at = run;
    at.cudnn_backward = s.cudnn_backward_tokens >= s.memory_tokens;
    const OneSequencePlan p = leanest_placement(spec, layout, at, s.memory_tokens);
    s.gpu_bytes = p.gpu_bytes;
    s.checkpoint_interval = p.interval;
  }
  // The checkpoints in host RAM, beside the host plan (with the backward that fits longer, as memory_tokens).
  const int64_t host_room = machine.ram_bytes > 0 ? ram_usable - host.ram_bytes() : std::numeric_limits<int64_t>::max();
  if (host_room < 0) return s;
  const auto on_host = [&](int64_t tokens, bool cudnn_backward) {
    RunShape r = run;
    r.cudnn_backward = cudnn_backward;
    return leanest_plan(spec, layout, r, tokens, CheckpointPlacement::host, host_room);
  };
  const auto host_longest = [&](bool cudnn_backward) {
    return longest_fitting(
        [&](int64_t steps) { return on_host(steps * kSequenceStep, cudnn_backward).gpu_bytes <= usable; });
  };
  s.host_memory_tokens = host_longest(false);
  bool host_cudnn = false;
  if (run.cudnn_attention) {
    const int64_t t = host_longest(true);
    host_cudnn = t > s.host_memory_tokens;
    s.host_memory_tokens = std::max(s.host_memory_tokens, t);
  }
  if (s.host_memory_tokens > 0) {
    const OneSequencePlan p = on_host(s.host_memory_tokens, host_cudnn);
    s.host_checkpoint_interval = p.interval;
    s.host_gpu_bytes = p.gpu_bytes;
    s.host_checkpoint_bytes = p.host_checkpoints;
  }
  return s;
}

}  // namespace mt
