// HostStore allocation: one 64-byte-aligned block per region and kind, Adam state and gradients zeroed.
#include "store/host_store.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace mt {
namespace {

void* allocate_zeroed(std::size_t bytes) {
  const std::size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  MT_REQUIRE(p != nullptr, "host store: cannot allocate {} bytes of host memory", bytes);
  std::memset(p, 0, rounded);
  return p;
}

}  // namespace

HostStore::HostStore(const ParamLayout& layout, DType stream_dtype) : layout_(layout), stream_dtype_(stream_dtype) {
  regions_.resize(layout_.regions.size());
  for (std::size_t r = 0; r < regions_.size(); ++r) {
    const auto n = static_cast<std::size_t>(layout_.regions[r].numel);
    auto take = [&](std::size_t bytes) {
      allocations_.push_back(allocate_zeroed(bytes));
      return allocations_.back();
    };
    regions_[r].master = static_cast<float*>(take(n * 4));
    regions_[r].exp_avg = static_cast<float*>(take(n * 4));
    regions_[r].exp_avg_sq = static_cast<float*>(take(n * 4));
    regions_[r].grad = static_cast<float*>(take(n * 4));
    if (stream_dtype_ == DType::bf16) regions_[r].stream_bf16 = static_cast<std::uint16_t*>(take(n * 2));
  }
}

HostStore::~HostStore() {
  for (void* p : allocations_) std::free(p);
}

void HostStore::refresh_stream_copy(int64_t r) {
  if (stream_dtype_ != DType::bf16) return;
  const float* src = regions_[r].master;
  std::uint16_t* dst = regions_[r].stream_bf16;
  const int64_t n = layout_.regions[r].numel;
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

}  // namespace mt
