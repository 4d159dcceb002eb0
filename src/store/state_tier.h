// StateTier: this rank's offloaded state (Adam m and v, and in optimizer+master mode the fp32 master) in files on the
// tier's paths (tier_layout.h), created at start (stale files of the same run removed), preallocated, opened with
// O_DIRECT where the file system allows it (buffered otherwise, logged once), and removed at a clean exit. The
// optimizer streams units through kStaging page-aligned, page-locked staging buffers (start_read / start_write /
// wait); checkpoints, restore and export use the synchronous slice access, which also reaches other ranks' files.
// Every part of a unit this rank writes has its checksum (core/tensor_checksum.h) kept in memory, and every read of
// it by this rank is checked against it: bytes the device or another program changed are refused in one line naming
// the file, the offset, the state kind and the tensors there.
// Invariants: after construction every unit reads as zeros until written; buffers are allocated once; an I/O failure
// throws one mt::Error naming the file, the operation and the system's error.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "store/offload_mode.h"
#include "store/tier_io.h"
#include "store/tier_layout.h"

namespace mt {

class StateTier {
 public:
  static constexpr int kStaging = 3;   // unit u+1 reading, u updating, u-1 writing back
  StateTier(const ParamLayout& layout, const TierSettings& settings, int rank, int ranks);
  ~StateTier();
  StateTier(const StateTier&) = delete;
  StateTier& operator=(const StateTier&) = delete;

  OffloadMode mode() const { return settings_.mode; }
  const TierLayout& units() const { return own_.layout; }  // this rank's
  // The position of a kind's part in a unit (0..kinds-1); -1 when the mode keeps the kind in RAM.
  int part_of(StateKind kind) const;
  bool direct_io() const { return direct_; }
  const char* io_name() const { return io_->name(); }
  std::string io_fallback_reason() const { return io_->fallback_reason(); }
  int64_t staging_bytes() const { return static_cast<int64_t>(staging_bytes_) * kStaging + sync_elements_ * 4; }
  // Floats of the synchronous access's buffer: the largest unit part of any rank.
  static int64_t sync_elements(const ParamLayout& layout, int ranks);

  // One kind of rank q's slice of region r (slice-size floats), synchronously.
  void read_slice(int q, int64_t r, StateKind kind, float* dst);
  void write_slice(int q, int64_t r, StateKind kind, const float* src);

  // The optimizer's stream over this rank's units (units().units[u]): staging buffer b holds unit u's parts,
  // each part_of(kind) × kind_stride floats in.
  float* staging(int b) { return buffers_[static_cast<size_t>(b)]; }
  void start_read(size_t u, int b);
  void start_write(size_t u, int b);
  void wait(int b);
  int64_t bytes_read() const { return bytes_read_; }
  int64_t bytes_written() const { return bytes_written_; }

 private:
  struct Files {
    TierLayout layout;
    std::vector<std::string> names;
    std::vector<int> fds;
  };
  Files& files_of(int q);
  void submit(Files& f, const TierUnit& unit, int64_t part, float* buffer, bool write, TierBatch& batch);
  void maybe_fill_device_for_test();
  // The checksums of this rank's units: part `part` of own unit u (the first end − begin elements of `data`).
  void record_part(size_t u, int part, const float* data);
  void check_part(size_t u, int part, const float* data) const;
  void remove_files_of_absent_ranks();

  ParamLayout param_layout_;
  TierSettings settings_;
  int rank_ = 0, ranks_ = 1;
  bool direct_ = true;
  Files own_;
  std::map<int, Files> peers_;
  std::unique_ptr<TierIo> io_;
  std::mutex mutex_;
  size_t staging_bytes_ = 0;
  std::vector<float*> buffers_;
  std::vector<TierBatch> batches_;
  struct InFlight {
    int64_t unit = -1;  // own unit whose read (checked at wait) staging buffer b holds; -1: none
  };
  std::vector<InFlight> in_flight_;
  int parts_ = 0;                       // offloaded kinds per unit
  std::vector<uint64_t> part_sums_;     // own unit u, part p: [u * parts_ + p]
  std::vector<uint8_t> part_known_;     // written by this rank since the tier was created
  float* sync_ = nullptr;
  int64_t sync_elements_ = 0;
  int64_t bytes_read_ = 0, bytes_written_ = 0;
  int64_t writes_ = 0, fill_after_writes_ = -1;  // test hook (fault_hooks().tier_full_after_writes)
};

}  // namespace mt
