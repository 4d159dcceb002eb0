// GradientReducer: sums a finished gradient accumulator over the data-parallel compute ranks. Implementations:
// engine/host_gradient_reducer.h (MPI through host memory), kernels/runtime/nccl_reducer.h (NCCL on the GPUs);
// engine/gradient_reducer.h's ReducingGradientSink puts one between the engine and the real gradient sink.
// Invariant every implementation keeps: every compute rank reduces the same regions in the same order, and every
// rank gets the same sums.
#pragma once
#include <cstdint>

namespace mt {

class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  // In place: data (n fp32 values in backend memory, written by ops already issued) becomes the sum over the
  // compute ranks; ops issued afterwards see the sum.
  virtual void all_reduce(float* data, int64_t n) = 0;
};

}  // namespace mt
