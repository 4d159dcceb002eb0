// The longest trainable sequence (see sequence_limit.h): a search over lengths with the memory plan.
#include "plan/sequence_limit.h"

#include <algorithm>

#include "core/error.h"

namespace mt {

int64_t model_position_limit(const ModelSpec& spec, std::string* why) {
  int64_t limit = spec.max_position_embeddings;
  std::string source = MT_FORMAT("max_position_embeddings {}", limit);
  bool uses_rope = false;
  for (const LayerSpec& l : spec.layers) uses_rope |= !l.is_deltanet() && l.attention.rope >= 0;
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

int64_t one_sequence_gpu_bytes(const ModelSpec& spec, RunShape run, int64_t tokens, int64_t* interval) {
  run.batch_size = run.passes = run.micro_batch_size = 1;
  run.recompute_layers = spec.num_layers;
  run.seq_len = tokens;
  const int64_t first = run.checkpoint_interval > 0 ? run.checkpoint_interval : 1;
  const int64_t last = run.checkpoint_interval > 0 ? run.checkpoint_interval : spec.num_layers;
  int64_t best = std::numeric_limits<int64_t>::max();
  for (int64_t c = first; c <= last; ++c) {
    run.checkpoint_interval = c;
    const int64_t total = plan_gpu(spec, run).total();
    if (total < best) {
      best = total;
      if (interval) *interval = c;
    }
  }
  return best;
}

SequenceLimit longest_trainable_sequence(const ModelSpec& spec, RunShape run, const Machine& machine) {
  SequenceLimit s;
  s.position_tokens = model_position_limit(spec, &s.position_source);
  const HostPlan host = plan_host(spec, run.stream_dtype, run.ranks, run.offload);
  s.host_fits = host.ram_bytes() <= static_cast<int64_t>(static_cast<double>(machine.ram_bytes) * kHostUsableShare) &&
                (machine.nvme_bytes < 0 || host.nvme_bytes <= machine.nvme_bytes);
  const int64_t usable = usable_gpu_bytes(machine.gpu_bytes);
  if (machine.gpu_bytes <= 0) return s;
  // The longest multiple of kSequenceStep whose plan fits, with the backward as `cudnn_backward` says.
  auto longest = [&](bool cudnn_backward) -> int64_t {
    RunShape r = run;
    r.cudnn_backward = cudnn_backward;
    auto fits = [&](int64_t steps) { return one_sequence_gpu_bytes(spec, r, steps * kSequenceStep) <= usable; };
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
  };
  s.memory_tokens = longest(false);
  if (s.memory_tokens == 0) return s;
  if (run.cudnn_attention) s.cudnn_backward_tokens = longest(true);
  RunShape at = run;
  at.cudnn_backward = s.cudnn_backward_tokens >= s.memory_tokens;
  s.gpu_bytes = one_sequence_gpu_bytes(spec, at, s.memory_tokens, &s.checkpoint_interval);
  return s;
}

}  // namespace mt
