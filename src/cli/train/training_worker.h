// The training role of every rank except world rank 0: receive the plan, hold this rank's slices of the
// host store, and run the optimizer on them as rank 0 submits steps, until rank 0 finishes.
// Invariant: creates its collective objects in run_training's order (HostStore, then OptimizerService).
#pragma once

namespace mt {

void run_training_worker();

}  // namespace mt
