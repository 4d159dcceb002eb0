// resolve_run_length (see run_length.h).
#include "cli/train/run_length.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace mt {

RunLength resolve_run_length(const TrainingConfig& t, int64_t num_examples) {
  MT_ASSERT((num_examples > 0 || t.num_train_epochs == 0.0) && t.batch_size > 0);
  RunLength r;
  r.steps_per_epoch = (num_examples + t.batch_size - 1) / t.batch_size;  // 0: a stream of unknown length
  r.steps = t.num_train_epochs > 0.0
                ? std::max<int64_t>(1, static_cast<int64_t>(std::ceil(t.num_train_epochs *
                                                                       static_cast<double>(r.steps_per_epoch))))
                : t.num_steps;
  r.warmup_steps = t.warmup_ratio > 0.0 ? static_cast<int64_t>(std::ceil(t.warmup_ratio * static_cast<double>(r.steps)))
                                        : t.warmup_steps;
  return r;
}

}  // namespace mt
