// The run's length and warmup in optimizer steps, from training.num_steps or training.num_train_epochs and
// training.warmup_steps or training.warmup_ratio, as transformers' Trainer resolves them.
// Invariant: steps >= 1; an epoch is ceil(examples / batch_size) steps (the batcher wraps the last partial batch
// into the next epoch's order); warmup = warmup_steps, or ceil(warmup_ratio × steps).
#pragma once
#include <cstdint>

#include "config/config.h"

namespace mt {

struct RunLength {
  int64_t steps = 0;
  int64_t warmup_steps = 0;
  int64_t steps_per_epoch = 0;
};

// num_examples 0: a stream (dataset.streaming), whose length is num_steps.
RunLength resolve_run_length(const TrainingConfig& training, int64_t num_examples);

}  // namespace mt
