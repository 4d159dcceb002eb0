// WeightStream: brings a region's streaming copy from the host store into backend memory, in the
// backend's dtype. Host-memory backends read fp32 regions in place and widen bf16 regions into one of `k`
// slots, round-robin; device backends copy into `k` device slots (the CUDA pipeline overlaps these copies).
// Invariant: a pointer from acquire() stays valid until `k` further acquires of other regions have happened.
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

  const void* acquire(int64_t region);
  int64_t regions_moved() const { return regions_moved_; }  // widened or copied regions, for accounting

 private:
  void fill(void* slot, int64_t region);
  Backend& backend_;
  HostStore& store_;
  std::vector<void*> slots_;
  std::vector<int64_t> slot_region_;
  std::vector<float> staging_;  // widened bf16 region for device backends computing in fp32
  int64_t next_slot_ = 0;
  int64_t regions_moved_ = 0;
};

// GradientSink: per-region fp32 gradient accumulators in backend memory, returned to the host store when final.
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
  std::vector<float*> buffers_;                  // lazily allocated: embedding, decoder layers, head
  std::vector<float> staging_;                   // host copy of an accumulator, for passes after the first
  float* buffer_for(int64_t region);
};

}  // namespace mt
