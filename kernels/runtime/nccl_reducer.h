// The NCCL gradient reducer: sums accumulators over the compute ranks on the GPUs (ncclAllReduce on the
// backend's compute stream, before the gradient leaves the GPU). Invariant: one NCCL communicator over the
// data-parallel ranks, made once (its unique id broadcast over MPI); every rank issues the same sums in order.
#pragma once
#include <mpi.h>

#include <memory>

#include "backend/backend.h"
#include "transfer/gradient_reducer.h"

namespace mt {

// Collective over `comm` (the compute ranks); backend must come from make_cuda_backend.
std::unique_ptr<GradientReducer> make_nccl_reducer(Backend& backend, MPI_Comm comm);

}  // namespace mt
