// Learning-rate schedules with linear warmup, as transformers defines them (get_*_schedule_with_warmup).
// Invariant: lr_at(k) is the rate used by optimizer update k (1-based); update 1 sees scheduler step 0.
#pragma once
#include <cstdint>
#include <string>

namespace mt {

struct LrSchedule {
  std::string kind = "constant";  // constant | linear | cosine
  double base_lr = 0.0;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  double min_lr_ratio = 0.0;      // floor of linear and cosine decay, as a fraction of base_lr
};

double lr_at(const LrSchedule& schedule, int64_t step);

}  // namespace mt
