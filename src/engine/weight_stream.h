// The basic weight stream and gradient sink (the interfaces and their invariants: transfer/weight_stream.h): a
// region's streaming copy from the host store into backend memory, in the backend's dtype, and each region's gradient
// back to the host store. BasicWeightStream / BasicGradientSink work with any backend, synchronously: host-memory
// backends read fp32 regions in place and widen bf16 weights (the bf16 copy, or fp32 master rounded to bf16 when the
// store streams fp32 for a bf16 model) into one of `k` slots; the CUDA pipeline overlaps its copies.
// Invariant: BasicWeightStream hands out a slot's copy again only for the same region at the same
// store.required_version(); on a miss it refills the next slot in turn.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "store/host_store.h"
#include "transfer/weight_stream.h"

namespace mt {

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
