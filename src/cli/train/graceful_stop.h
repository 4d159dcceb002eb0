// The train loop's side of a graceful stop (core/stop_signal.h): after each step's forward and backward, every
// compute rank learns whether any of them has received a stop signal, so that all of them end after the same
// step. Invariant: collective over the compute ranks (dp.comm), called exactly once per step by each of them.
#pragma once
#include "dist/data_parallel.h"

namespace mt {

// True on every compute rank when a stop signal reached any of them (a single rank: its own flag).
bool stop_agreed(const dist::DataParallel& dp);

}  // namespace mt
