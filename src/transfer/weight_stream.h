// The weight stream and the gradient sink: how a region's streaming copy reaches backend memory from the host store,
// and how a region's gradient goes back. The engine announces a pass's whole acquisition order first (plan), so a
// pipelined implementation can copy ahead. Implementations: engine/weight_stream.h (BasicWeightStream,
// BasicGradientSink: any backend, synchronously), kernels/runtime/pipeline.h (CUDA: copy streams ahead of compute).
// Invariants every implementation keeps: a pointer from acquire() stays valid until the next acquire(); no region of
// the store is read before store.wait_region(region) has returned (the optimizer of the previous step may still be
// updating it), and a copy of a region is reused only at the same store.required_version().
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

namespace mt {

// Transfer figures since the last take(): copy-stream busy time and bytes, and how long compute waited
// for weights (zero where a stream does not measure them).
struct PipelineStats {
  double h2d_seconds = 0, d2h_seconds = 0, compute_wait_seconds = 0;
  int64_t h2d_bytes = 0, d2h_bytes = 0;
};

class PipelineCounters {
 public:
  virtual ~PipelineCounters() = default;
  virtual PipelineStats take() = 0;  // call when the backend is idle (after a step)
};

class WeightStream {
 public:
  virtual ~WeightStream() = default;
  virtual void plan(const std::vector<int64_t>& regions) = 0;  // the acquisitions of the coming pass, in order
  virtual const void* acquire(int64_t region) = 0;              // the next planned region, ready for compute
  virtual void release(int64_t region) = 0;                     // every op reading it has been issued
  virtual int64_t bytes_moved() const = 0;                      // host → backend bytes so far
};

class GradientSink {
 public:
  virtual ~GradientSink() = default;
  virtual float* begin(int64_t region) = 0;                     // a zeroed fp32 accumulator for the region
  virtual void finish(int64_t region, bool first_pass) = 0;     // host grad = (first_pass ? 0 : host grad) + acc
  virtual void wait() = 0;                                      // every finished gradient has reached the host
  virtual int64_t bytes_moved() const = 0;                      // backend → host bytes so far
  // Σ g² over the accumulators finished since the last call, where the sink computes it on the backend
  // (deterministically, in region order); call after wait(). Empty where it does not.
  virtual std::optional<double> sum_of_squares() { return std::nullopt; }
};

}  // namespace mt
