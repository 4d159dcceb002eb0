// HostStore: per-parameter state in host RAM (fp32 master, m, v, gradient; bf16 stream copy in bf16 mode), one
// flat region per layer, in one MPI-3 shared window of the node; each region is cut into per-rank slices that
// their owners first-touch (NUMA-local) and update. Invariants: every (region, kind) buffer and every slice is
// contiguous and page-aligned; the stream copy equals round_to_bf16(master) after every update; region r is at
// version v once every rank has published its slice of r at v, and readers wait for required_version(); its
// gradient may be overwritten once every rank has published its slice's Adam moments of that version too. Regions a
// device holds (resident_regions.h) are published as their updates are handed out; their state here follows by
// sync_resident().
// With store.offload, the kinds the mode offloads (offload_mode.h) have no RAM buffer (their pointers are null):
// they live in this rank's StateTier files, reached through tier() and the *_state functions.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "dist/context.h"
#include "dist/shared_window.h"
#include "model/param_layout.h"
#include "store/offload_mode.h"
#include "store/state_tier.h"

namespace mt {

class ResidentRegions;  // optim/resident_regions.h

class HostStore {
 public:
  // Collective over the node's ranks; every rank passes the same layout and dtype.
  // tier.mode other than none: the offloaded kinds in this rank's files (optimizer+master needs a bf16 stream copy).
  HostStore(const ParamLayout& layout, DType stream_dtype, const TierSettings& tier = {});
  ~HostStore();
  HostStore(const HostStore&) = delete;
  HostStore& operator=(const HostStore&) = delete;

  const ParamLayout& layout() const { return layout_; }
  int64_t num_regions() const { return static_cast<int64_t>(regions_.size()); }
  int64_t numel(int64_t r) const { return layout_.regions[static_cast<size_t>(r)].numel; }
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
  void refresh_stream_copy(int64_t r, const float* master);  // from a whole region's master (elsewhere than RAM)

  // The tier (null without offload) and whole-region access to any kind wherever it lives: every rank's slice, from
  // RAM or from that rank's tier files (one rank at a time, every optimizer idle).
  OffloadMode offload() const { return tier_ ? tier_->mode() : OffloadMode::none; }
  StateTier* tier() { return tier_.get(); }
  const StateTier* tier() const { return tier_.get(); }
  bool in_ram(StateKind kind) const { return !kind_offloaded(offload(), kind); }
  float* state(int64_t r, StateKind kind);   // the RAM buffer; null when offloaded
  void read_region_state(int64_t r, StateKind kind, float* dst);
  void write_region_state(int64_t r, StateKind kind, const float* src);
  // This rank's slice of one kind: a pointer into RAM, or `staging` (slice-size floats) filled from the tier.
  const float* slice_state(int64_t r, StateKind kind, float* staging);

  // Slices: a region of n elements is cut into `ranks` contiguous pieces of ceil(n / ranks) elements
  // rounded up to kSliceAlign (the last ones shorter or empty). kSliceAlign is the optimizer's norm
  // block and makes every slice page-aligned in fp32 (16 KiB) and bf16 (8 KiB).
  static constexpr int64_t kSliceAlign = 4096;
  struct Slice {
    int64_t begin = 0, end = 0;
    int64_t size() const { return end - begin; }
  };
  static Slice slice_of(int64_t numel, int rank, int ranks);
  Slice slice(int64_t r) const { return slice_of(numel(r), rank_, ranks_); }
  int rank() const { return rank_; }    // node rank
  int ranks() const { return ranks_; }  // node size

  // Page-locking hook: every (region, kind) buffer, for the CUDA backend to cudaHostRegister.
  struct Allocation {
    void* data = nullptr;
    std::size_t bytes = 0;
  };
  const std::vector<Allocation>& allocations() const { return allocations_; }

  // Host bytes per parameter (fp32 master + m + v + grad, + 2 for the bf16 copy); bytes of the
  // parameters of `rank`'s slices; bytes of the shared window (with page padding and flags).
  int64_t bytes_per_parameter() const;
  int64_t total_bytes() const { return layout_.total_numel * bytes_per_parameter(); }
  int64_t rank_bytes(int rank) const;
  int64_t window_bytes() const { return static_cast<int64_t>(window_->bytes()); }

  // Versions: each rank publishes its slice of region r after updating it; readers (the engine) wait
  // until every slice holds the version they require.
  void publish_slice(int64_t r, int64_t version);
  void set_required_version(int64_t version) { required_version_ = version; }
  int64_t required_version() const { return required_version_; }
  void wait_region(int64_t r) const { wait_region(r, required_version_); }
  void wait_region(int64_t r, int64_t version) const;
  // The optimizer's second pass (Adam m, v) reads the gradient after the region is published: each rank
  // publishes its slice's moments, and a writer of region r's gradient waits for the required version.
  void publish_moments(int64_t r, int64_t version);
  void wait_moments(int64_t r) const { wait_versions(moment_versions_, r, required_version_); }
  void wait_moments(int64_t r, int64_t version) const { wait_versions(moment_versions_, r, version); }
  // Whether every slice already holds the version (what the waits would return at once).
  bool region_ready(int64_t r, int64_t version) const { return versions_ready(versions_, r, version); }
  bool moments_ready(int64_t r, int64_t version) const { return versions_ready(moment_versions_, r, version); }
  // Seconds this process has spent blocked in wait_region and wait_moments (on any thread: the CUDA pipeline waits
  // in its copy streams' host functions): optimizer work the engine did not hide.
  double waited_seconds() const { return waited_seconds_.load(std::memory_order_relaxed); }

  // Regions whose state a device holds (resident_regions.h), set by their owner for its lifetime (null: none); the
  // optimizer leaves [0, resident_count()) to it. Their master, moments and stream copy here are current only after
  // sync_resident() (every optimizer idle), which whatever reads them on the host calls first.
  void set_resident(ResidentRegions* resident) { resident_ = resident; }
  ResidentRegions* resident() const { return resident_; }
  int64_t resident_count() const;
  void sync_resident();

 private:
  struct RegionBuffers {
    float* master = nullptr;
    float* exp_avg = nullptr;
    float* exp_avg_sq = nullptr;
    float* grad = nullptr;
    std::uint16_t* stream_bf16 = nullptr;
  };
  int64_t* version_row(const int64_t* table, int rank) const;
  void wait_versions(const int64_t* table, int64_t r, int64_t version) const;
  bool versions_ready(const int64_t* table, int64_t r, int64_t version) const;

  ParamLayout layout_;
  DType stream_dtype_;
  int rank_ = 0, ranks_ = 1;
  std::unique_ptr<StateTier> tier_;
  std::unique_ptr<dist::SharedWindow> window_;
  std::vector<RegionBuffers> regions_;
  std::vector<Allocation> allocations_;
  int64_t* versions_ = nullptr;   // [ranks][version_stride]: rank q's published version of each region
  int64_t* moment_versions_ = nullptr;  // the same for its Adam moments
  int64_t version_stride_ = 0;
  int64_t required_version_ = 0;
  mutable std::atomic<double> waited_seconds_{0.0};
  ResidentRegions* resident_ = nullptr;
};

}  // namespace mt
