// The MPI gradient reducer: sums accumulators over the compute ranks through host memory (MPI_Allreduce), for
// the CPU backend and for GPU builds without NCCL. Invariant: every rank gets the same sums (one MPI_Allreduce
// per chunk of at most 2^30 values, issued in the same order everywhere).
#pragma once
#include <mpi.h>

#include <vector>

#include "backend/backend.h"
#include "transfer/gradient_reducer.h"

namespace mt {

class HostGradientReducer final : public GradientReducer {
 public:
  HostGradientReducer(Backend& backend, MPI_Comm comm) : backend_(backend), comm_(comm) {}
  void all_reduce(float* data, int64_t n) override;

 private:
  Backend& backend_;
  MPI_Comm comm_;
  std::vector<float> staging_;  // device backends: the accumulator's host copy
};

}  // namespace mt
