// The training role of every rank that runs no engine (dist/data_parallel.h): receive the plan, hold this
// rank's slices of the node's host store, and run the optimizer on them as the node's rank 0 submits steps,
// until it finishes. Invariant: makes its node-collective calls in run_training's order (plan, HostStore,
// OptimizerService, the barrier after the store is filled).
#pragma once

namespace mt {

void run_training_worker();

}  // namespace mt
