// The state tier's log line (see tier_log.h).
#include "store/tier_log.h"

#include <fmt/ranges.h>

#include "core/log.h"
#include "store/shared_memory_check.h"

namespace mt {

void log_state_tier(const StateTier& tier) {
  std::vector<std::string> files;
  for (const auto& f : tier.units().files) files.push_back(f.parent_path().string());
  const std::string reason = tier.io_fallback_reason();
  log::info("state tier: store.offload {}: {} of rank 0's state in {} file(s) ({}), {} units; I/O through {}{}, {}; "
            "staging {}",
            offload_mode_name(tier.mode()), format_bytes(static_cast<uint64_t>(tier.units().total_bytes())),
            files.size(), fmt::format("{}", fmt::join(files, ", ")), tier.units().units.size(), tier.io_name(),
            reason.empty() ? "" : " (" + reason + ")", tier.direct_io() ? "O_DIRECT" : "buffered",
            format_bytes(static_cast<uint64_t>(tier.staging_bytes())));
}

}  // namespace mt
