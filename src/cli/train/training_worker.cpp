// A worker rank's part of `train` (see training_worker.h).
#include "cli/train/training_worker.h"

#include "cli/train/optimizer_service.h"
#include "cli/train/train_plan.h"
#include "store/host_store.h"

namespace mt {

void run_training_worker() {
  const TrainPlan plan = receive_train_plan();
  HostStore store(plan.layout, plan.dtype);
  OptimizerService optimizer(store, plan.optimizer);
  optimizer.serve();
}

}  // namespace mt
