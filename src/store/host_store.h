// HostStore: all persistent per-parameter state in host RAM, one flat region per layer (ParamLayout):
// fp32 master, fp32 Adam m and v, fp32 gradient, and in bf16 mode the bf16 copy that streams to compute.
// Invariant: after refresh_stream_copy(r) (and after every optimizer update) the stream copy of region r
// equals round_to_bf16(master); in fp32 mode the master itself streams.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "model/param_layout.h"

namespace mt {

class HostStore {
 public:
  HostStore(const ParamLayout& layout, DType stream_dtype);
  ~HostStore();
  HostStore(const HostStore&) = delete;
  HostStore& operator=(const HostStore&) = delete;

  const ParamLayout& layout() const { return layout_; }
  int64_t num_regions() const { return static_cast<int64_t>(regions_.size()); }
  DType stream_dtype() const { return stream_dtype_; }

  float* master(int64_t r) { return regions_[r].master; }
  const float* master(int64_t r) const { return regions_[r].master; }
  float* exp_avg(int64_t r) { return regions_[r].exp_avg; }
  float* exp_avg_sq(int64_t r) { return regions_[r].exp_avg_sq; }
  float* grad(int64_t r) { return regions_[r].grad; }
  const float* grad(int64_t r) const { return regions_[r].grad; }
  std::uint16_t* stream_bf16(int64_t r) { return regions_[r].stream_bf16; }  // null in fp32 mode
  const std::uint16_t* stream_bf16(int64_t r) const { return regions_[r].stream_bf16; }

  void refresh_stream_copy(int64_t r);
  // Host bytes held per parameter (fp32 master + m + v + grad, + 2 for the bf16 copy).
  int64_t bytes_per_parameter() const { return stream_dtype_ == DType::bf16 ? 18 : 16; }
  int64_t total_bytes() const { return layout_.total_numel * bytes_per_parameter(); }

 private:
  struct RegionBuffers {
    float* master = nullptr;
    float* exp_avg = nullptr;
    float* exp_avg_sq = nullptr;
    float* grad = nullptr;
    std::uint16_t* stream_bf16 = nullptr;
  };
  ParamLayout layout_;
  DType stream_dtype_;
  std::vector<RegionBuffers> regions_;
  std::vector<void*> allocations_;
};

}  // namespace mt
