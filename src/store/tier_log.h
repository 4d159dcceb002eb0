// One log line describing the state tier as the node's rank 0 built it: mode, files, bytes, I/O path, staging.
#pragma once
#include "store/state_tier.h"

namespace mt {
void log_state_tier(const StateTier& tier);
}  // namespace mt
