// Warmup then constant, linear or cosine decay towards min_lr_ratio · base_lr.
#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace mt {

double lr_at(const LrSchedule& schedule, int64_t step) {
  MT_ASSERT(step >= 1);
  const auto s = static_cast<double>(step - 1);
  const auto warmup = static_cast<double>(schedule.warmup_steps);
  if (s < warmup) return schedule.base_lr * s / std::max(1.0, warmup);
  const double progress = (s - warmup) / std::max(1.0, static_cast<double>(schedule.total_steps) - warmup);
  double factor = 1.0;
  if (schedule.kind == "linear") {
    factor = std::max(0.0, 1.0 - progress);
  } else if (schedule.kind == "cosine") {
    factor = 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  } else {
    MT_ASSERT(schedule.kind == "constant", "unknown schedule {}", schedule.kind);
    return schedule.base_lr;
  }
  return schedule.base_lr * (schedule.min_lr_ratio + (1.0 - schedule.min_lr_ratio) * factor);
}

}  // namespace mt
