// A worker rank's part of `train` (see training_worker.h).
#include "cli/train/training_worker.h"

#include "cli/runtime/node_store.h"
#include "cli/train/checkpoint_saver.h"
#include "cli/train/train_plan.h"

namespace mt {

void run_training_worker() {
  const TrainPlan plan = receive_train_plan();
  NodeStore node(plan.layout, plan.dtype, plan.tier, plan.optimizer, false);
  node.optimizer().set_updates_applied(plan.updates_applied);
  node.filled();  // the node's rank 0 has filled the store
  CheckpointSaver saver(node.store());
  // Path, meta and limit come from rank 0; before the test hook's kill, the save in flight completes.
  node.optimizer().serve([&] { saver.save({}, {}, 0); }, [&] { saver.wait(); });
  saver.wait();
}

}  // namespace mt
