// Weight streaming and gradient return through the backend's memory interface (see weight_stream.h).
#include "engine/weight_stream.h"

#include "core/dtype.h"
#include "core/error.h"

namespace mt {

BasicWeightStream::BasicWeightStream(Backend& backend, HostStore& store, int64_t slots, std::optional<DType> weights)
    : backend_(backend), store_(store), slots_(static_cast<size_t>(slots), nullptr),
      slot_region_(static_cast<size_t>(slots), -1), slot_version_(static_cast<size_t>(slots), -1),
      weights_(weights.value_or(store.stream_dtype())) {
  MT_ASSERT(slots >= 2);
  MT_ASSERT(backend_.dtype() == DType::f32 || weights_ == backend_.dtype(),
            "a {} backend cannot compute on {} weights", dtype_name(backend_.dtype()), dtype_name(weights_));
  MT_ASSERT(store_.stream_dtype() == DType::f32 || weights_ == DType::bf16, "bf16 copies cannot give fp32 weights");
}

BasicWeightStream::~BasicWeightStream() {
  for (void* p : slots_)
    if (p) backend_.free_bytes(p);
}

void BasicWeightStream::fill(void* slot, int64_t region) {
  const int64_t n = store_.layout().regions[static_cast<size_t>(region)].numel;
  const bool from_master = store_.stream_dtype() == DType::f32;
  const float* master = store_.master(region);
  if (backend_.dtype() == weights_ && (weights_ == DType::f32) == from_master) {  // the store holds them as they are
    const void* src = from_master ? static_cast<const void*>(master) : static_cast<const void*>(store_.stream_bf16(region));
    backend_.upload(slot, src, n * static_cast<int64_t>(dtype_size(backend_.dtype())));
    return;
  }
  if (backend_.dtype() == DType::bf16) {  // fp32 master, bf16 compute: round on the host
    staging16_.resize(static_cast<size_t>(n));
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) staging16_[static_cast<size_t>(i)] = f32_to_bf16(master[i]);
    backend_.upload(slot, staging16_.data(), n * 2);
    return;
  }
  // fp32 compute on bf16 weights: widen the bf16 copy, or master rounded to bf16.
  const std::uint16_t* copy = store_.stream_bf16(region);
  float* dst = static_cast<float*>(slot);
  if (!backend_.host_memory()) {
    staging_.resize(static_cast<size_t>(n));
    dst = staging_.data();
  }
  if (from_master) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) dst[i] = round_to_bf16(master[i]);
  } else {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(copy[i]);
  }
  if (!backend_.host_memory()) backend_.upload(slot, dst, n * 4);
}

const void* BasicWeightStream::acquire(int64_t region) {
  store_.wait_region(region);
  const int64_t version = store_.required_version();
  if (backend_.host_memory() && store_.stream_dtype() == DType::f32 && weights_ == DType::f32)
    return store_.master(region);
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slot_region_[i] == region && slot_version_[i] == version) return slots_[i];
  const auto s = static_cast<size_t>(next_slot_);
  next_slot_ = (next_slot_ + 1) % static_cast<int64_t>(slots_.size());
  if (!slots_[s]) slots_[s] = backend_.alloc(store_.layout().largest_region_numel);
  fill(slots_[s], region);
  slot_region_[s] = region;
  slot_version_[s] = version;
  bytes_moved_ += store_.layout().regions[static_cast<size_t>(region)].numel *
                  static_cast<int64_t>(dtype_size(store_.stream_dtype()));
  return slots_[s];
}

BasicGradientSink::BasicGradientSink(Backend& backend, HostStore& store)
    : backend_(backend), store_(store), buffers_(3, nullptr) {}

BasicGradientSink::~BasicGradientSink() {
  for (float* p : buffers_)
    if (p) backend_.free_bytes(p);
}

// Buffer 0: embedding (lives across the whole pass when tied), 1: decoder layers (of the largest's size), 2: head.
float* BasicGradientSink::buffer_for(int64_t region) {
  const ParamLayout& layout = store_.layout();
  const size_t kind = region == 0 ? 0 : (region + 1 == static_cast<int64_t>(layout.regions.size()) ? 2 : 1);
  const int64_t n = kind == 1 ? layout.largest_layer_numel : layout.regions[static_cast<size_t>(region)].numel;
  if (!buffers_[kind]) buffers_[kind] = backend_.alloc_reals(n);
  return buffers_[kind];
}

float* BasicGradientSink::begin(int64_t region) {
  float* b = buffer_for(region);
  backend_.zero_bytes(b, store_.layout().regions[static_cast<size_t>(region)].numel * 4);
  return b;
}

void BasicGradientSink::finish(int64_t region, bool first_pass) {
  const float* b = buffer_for(region);
  const int64_t n = store_.layout().regions[static_cast<size_t>(region)].numel;
  store_.wait_moments(region);  // the optimizer's moments pass has read the previous gradient
  float* host = store_.grad(region);
  bytes_moved_ += n * 4;
  if (first_pass) {
    backend_.download(host, b, n * 4);
    return;
  }
  staging_.resize(static_cast<size_t>(n));
  backend_.download(staging_.data(), b, n * 4);
  const float* add = staging_.data();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) host[i] += add[i];
}

}  // namespace mt
