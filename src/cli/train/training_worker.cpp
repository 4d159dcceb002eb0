// A worker rank's part of `train` (see training_worker.h).
#include "cli/train/training_worker.h"

#include "checkpoint/checkpoint_writer.h"
#include "cli/train/optimizer_service.h"
#include "cli/train/train_plan.h"
#include "store/host_store.h"

namespace mt {

void run_training_worker() {
  const TrainPlan plan = receive_train_plan();
  HostStore store(plan.layout, plan.dtype);
  OptimizerService optimizer(store, plan.optimizer);
  optimizer.set_updates_applied(plan.updates_applied);
  optimizer.serve([&] { save_checkpoint({}, store, {}); });  // path and meta come from rank 0
}

}  // namespace mt
