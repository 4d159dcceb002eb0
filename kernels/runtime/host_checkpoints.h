// The CUDA backend's host placement of the activation checkpoints (transfer/checkpoint_store.h, with the rules of
// engine/checkpoint_store.h's HostCheckpoints): page-locked host slots (cudaHostAlloc), two staging buffers in device
// memory, one copy stream ordered by events, as the weight pipeline (pipeline.h) streams weights. The forward's copy of
// checkpoint k out (D2H) follows the compute stream's write of it by an event and never blocks compute; compute waits
// only where it writes a staging buffer again (checkpoint k + 2) before that buffer's copy out has finished. The
// backward's acquire(k) starts the copy in (H2D) of checkpoint k − 1 into the other buffer once compute has released
// k + 1 there, so it overlaps segment k's recompute and backward; the last two checkpoints of the forward are read
// where they are.
// Invariant: every copy runs on the one copy stream (a slot is read in only after its copy out, written again only
// after its copy in); a staging buffer is overwritten only after every op and copy that used it has finished.
#pragma once
#include <memory>

#include "backend/backend.h"
#include "transfer/checkpoint_store.h"

namespace mt {

// backend must come from make_cuda_backend.
std::unique_ptr<CheckpointStore> make_cuda_host_checkpoints(Backend& backend);

}  // namespace mt
