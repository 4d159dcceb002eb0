// CPU-side weight streaming and gradient return (see weight_stream.h).
#include "engine/weight_stream.h"

#include "core/dtype.h"
#include "core/error.h"

namespace mt {

WeightStream::WeightStream(Backend& backend, HostStore& store, int64_t slots)
    : backend_(backend), store_(store), slots_(static_cast<size_t>(slots), nullptr),
      slot_region_(static_cast<size_t>(slots), -1) {
  MT_ASSERT(slots >= 2);
}

WeightStream::~WeightStream() {
  for (float* p : slots_)
    if (p) backend_.free_floats(p);
}

const float* WeightStream::acquire(int64_t region) {
  if (store_.stream_dtype() == DType::f32) return store_.master(region);
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slot_region_[i] == region) return slots_[i];
  const auto s = static_cast<size_t>(next_slot_);
  next_slot_ = (next_slot_ + 1) % static_cast<int64_t>(slots_.size());
  if (!slots_[s]) slots_[s] = backend_.alloc_floats(store_.layout().largest_region_numel);
  const std::uint16_t* src = store_.stream_bf16(region);
  float* dst = slots_[s];
  const int64_t n = store_.layout().regions[static_cast<size_t>(region)].numel;
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
  slot_region_[s] = region;
  ++regions_moved_;
  return dst;
}

GradientSink::GradientSink(Backend& backend, HostStore& store)
    : backend_(backend), store_(store), buffers_(3, nullptr) {}

GradientSink::~GradientSink() {
  for (float* p : buffers_)
    if (p) backend_.free_floats(p);
}

// Buffer 0: embedding (lives across the whole pass when tied), 1: decoder layers, 2: head.
float* GradientSink::buffer_for(int64_t region) {
  const auto& regions = store_.layout().regions;
  const size_t kind = region == 0 ? 0 : (region + 1 == static_cast<int64_t>(regions.size()) ? 2 : 1);
  if (!buffers_[kind]) {
    const int64_t n = kind == 1 ? store_.layout().largest_region_numel : regions[static_cast<size_t>(region)].numel;
    buffers_[kind] = backend_.alloc_floats(n);
  }
  return buffers_[kind];
}

float* GradientSink::begin(int64_t region) {
  float* b = buffer_for(region);
  backend_.zero(b, store_.layout().regions[static_cast<size_t>(region)].numel);
  return b;
}

void GradientSink::finish(int64_t region, bool first_pass) {
  const float* b = buffer_for(region);
  const int64_t n = store_.layout().regions[static_cast<size_t>(region)].numel;
  float* host = store_.grad(region);
  if (first_pass) {
    backend_.copy(host, b, n);
  } else {
    backend_.add(host, b, n);
  }
}

}  // namespace mt
