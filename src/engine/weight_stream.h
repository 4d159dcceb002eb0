// WeightStream: brings a region's streaming copy from the host store into backend memory, in the
// backend's dtype; GradientSink returns each region's gradient to the host store. The engine announces a
// pass's whole acquisition order first (plan), so a pipelined implementation can copy ahead.
// BasicWeightStream / BasicGradientSink work with any backend, synchronously: host-memory backends read fp32
// regions in place and widen bf16 weights (the bf16 copy, or fp32 master rounded to bf16 when the store streams
// fp32 for a bf16 model) into one of `k` slots; the CUDA pipeline overlaps its copies.
// Invariants: a pointer from acquire() stays valid until the next acquire(). No implementation reads a region
// of the store before store.wait_region(region) has returned (the optimizer of the previous step may still be
// updating it), and a copy of a region is reused only at the same store.required_version().
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "store/host_store.h"

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

class BasicWeightStream final : public WeightStream {
 public:
  // weights: the dtype the model computes its weights in (bf16 or fp32); unset = the store's streaming dtype.
  BasicWeightStream(Backend& backend, HostStore& store, int64_t slots, std::optional<DType> weights = std::nullopt);
  ~BasicWeightStream() override;
  BasicWeightStream(const BasicWeightStream&) = delete;
  BasicWeightStream& operator=(const BasicWeightStream&) = delete;

  void plan(const std::vector<int64_t>&) override {}
  const void* acquire(int64_t region) override;
  void release(int64_t) override {}
  int64_t bytes_moved() const override { return bytes_moved_; }

 private:
  void fill(void* slot, int64_t region);
  Backend& backend_;
  HostStore& store_;
  std::vector<void*> slots_;
  std::vector<int64_t> slot_region_;
  std::vector<int64_t> slot_version_;   // store.required_version() when the slot was filled
  DType weights_;
  std::vector<float> staging_;            // widened bf16 region for device backends computing in fp32
  std::vector<std::uint16_t> staging16_;  // fp32 master rounded to bf16, for device backends computing in bf16
  int64_t next_slot_ = 0;
  int64_t bytes_moved_ = 0;
};

class BasicGradientSink final : public GradientSink {
 public:
  BasicGradientSink(Backend& backend, HostStore& store);
  ~BasicGradientSink() override;
  BasicGradientSink(const BasicGradientSink&) = delete;
  BasicGradientSink& operator=(const BasicGradientSink&) = delete;

  float* begin(int64_t region) override;
  void finish(int64_t region, bool first_pass) override;
  void wait() override {}
  int64_t bytes_moved() const override { return bytes_moved_; }

 private:
  Backend& backend_;
  HostStore& store_;
  std::vector<float*> buffers_;                  // lazily allocated: embedding, decoder layers, head
  std::vector<float> staging_;                   // host copy of an accumulator, for passes after the first
  int64_t bytes_moved_ = 0;
  float* buffer_for(int64_t region);
};

}  // namespace mt
