// TrainPlan: what the ranks without data need to take part in training — the parameter layout, the
// streaming dtype and the optimizer settings — broadcast once over the node by its rank 0 after it has validated
// every input.
// Invariant: every rank of the node builds its HostStore and Optimizer from the same plan, in the same order.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "model/param_layout.h"
#include "optim/optimizer.h"

namespace mt {

struct TrainPlan {
  ParamLayout layout;
  DType dtype = DType::f32;
  OptimizerSettings optimizer;
  int64_t updates_applied = 0;  // AdamW's step count restored from a checkpoint (0 for a fresh run)
};

void broadcast_train_plan(const TrainPlan& plan);  // node rank 0
TrainPlan receive_train_plan();                    // every other rank of the node

}  // namespace mt
