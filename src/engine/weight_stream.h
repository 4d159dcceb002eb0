// WeightStream: brings a region's streaming copy from the host store into backend memory for compute.
// On the CPU backend fp32 regions are read in place and bf16 regions are widened into one of `k` slots,
// round-robin; the CUDA pipeline replaces this with page-locked DMA into GPU slots.
// Invariant: a pointer from acquire() stays valid until `k` further acquires have happened.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "store/host_store.h"

namespace mt {

class WeightStream {
 public:
  WeightStream(Backend& backend, HostStore& store, int64_t slots);
  ~WeightStream();
  WeightStream(const WeightStream&) = delete;
  WeightStream& operator=(const WeightStream&) = delete;

  const float* acquire(int64_t region);
  int64_t regions_moved() const { return regions_moved_; }  // widened or copied regions, for accounting

 private:
  Backend& backend_;
  HostStore& store_;
  std::vector<float*> slots_;
  std::vector<int64_t> slot_region_;
  int64_t next_slot_ = 0;
  int64_t regions_moved_ = 0;
};

// GradientSink: per-region gradient accumulators in backend memory, returned to the host store when final.
class GradientSink {
 public:
  GradientSink(Backend& backend, HostStore& store);
  ~GradientSink();
  GradientSink(const GradientSink&) = delete;
  GradientSink& operator=(const GradientSink&) = delete;

  float* begin(int64_t region);                  // a zeroed accumulator for the region
  void finish(int64_t region, bool first_pass);  // host grad = (first_pass ? 0 : host grad) + accumulator

 private:
  Backend& backend_;
  HostStore& store_;
  std::vector<float*> buffers_;                  // lazily allocated, one per region kind in use
  float* buffer_for(int64_t region);
};

}  // namespace mt
