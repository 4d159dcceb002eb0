// A worker rank's part of `train` (see training_worker.h).
#include "cli/train/training_worker.h"

#include "cli/runtime/optimizer_service.h"
#include "cli/train/checkpoint_saver.h"
#include "cli/train/train_plan.h"
#include "dist/check.h"
#include "dist/context.h"
#include "store/host_store.h"

namespace mt {

void run_training_worker() {
  const TrainPlan plan = receive_train_plan();
  HostStore store(plan.layout, plan.dtype, plan.tier);
  OptimizerService optimizer(store, plan.optimizer, false);
  optimizer.set_updates_applied(plan.updates_applied);
  MT_CHECK_MPI(MPI_Barrier(dist::context().node));  // the node's rank 0 has filled the store
  CheckpointSaver saver(store);
  // Path, meta and limit come from rank 0; before the test hook's kill, the save in flight completes.
  optimizer.serve([&] { saver.save({}, {}, 0); }, [&] { saver.wait(); });
  saver.wait();
}

}  // namespace mt
