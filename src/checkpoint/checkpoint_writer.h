// Saving a checkpoint: one HDF5 file written collectively by every rank of the node (the first node: each node
// holds the same replica) with MPI-IO, each rank writing the hyperslabs of its own slices, from the HostStore or a snapshot of them (fp32 master, exp_avg,
// exp_avg_sq under the HF tensor names, in their HF shapes) and every rank the same /meta attributes (DESIGN.md §6);
// each dataset carries its checksum (tensor_checksum.h), the sum of every rank's part.
// Invariant: the file is complete under its final name or absent — it is written as "<name>.tmp", closed by
// every rank, and renamed by rank 0 after a barrier; a crash before that leaves older checkpoints untouched.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "checkpoint/checkpoint_meta.h"
#include "store/host_store.h"

namespace mt {

struct SaveReport {
  int64_t bytes = 0;      // tensor bytes in the file (every rank's)
  double seconds = 0.0;   // from open to rename
};

// What one rank writes: per region, its slice and where that slice's master, exp_avg and exp_avg_sq are
// (each pointer addresses element slice.begin of the region). Either the HostStore itself (a synchronous save,
// every optimizer idle) or a CheckpointSnapshot (a background save while training continues).
struct CheckpointSource {
  struct Region {
    HostStore::Slice slice;
    const float* master = nullptr;
    const float* exp_avg = nullptr;
    const float* exp_avg_sq = nullptr;
  };
  const ParamLayout* layout = nullptr;
  std::vector<Region> regions;
  // Where a kind lives on the state tier (its pointer is null): this rank's slice of it, read from the tier into
  // a buffer that stays valid until the next call.
  std::function<const float*(size_t region, StateKind kind)> fetch;
};
CheckpointSource store_source(HostStore& store);

// A private copy of this rank's slices of master, exp_avg and exp_avg_sq (threads copy, first-touching it).
class CheckpointSnapshot {
 public:
  explicit CheckpointSnapshot(HostStore& store);
  const CheckpointSource& source() const { return source_; }
  int64_t bytes() const { return static_cast<int64_t>(elements_) * 12; }

 private:
  struct Unmap {
    size_t bytes;
    void operator()(float* p) const;
  };
  size_t elements_ = 0;
  std::unique_ptr<float, Unmap> data_;
  CheckpointSource source_;
};

// Collective over the world communicator; `source` must not change while it runs. `path` and `meta` are taken
// from world rank 0 (broadcast); other ranks may pass anything. Rank 0 renames the file and, with keep > 0,
// prunes the directory to the newest `keep` checkpoints.
SaveReport save_checkpoint(const std::filesystem::path& path, const CheckpointSource& source,
                           const CheckpointMeta& meta, int64_t keep = 0);

// Rank 0: deletes the oldest step-*.h5 in `dir` beyond the newest `keep` (keep <= 0: keeps all).
void prune_checkpoints(const std::filesystem::path& dir, int64_t keep);

}  // namespace mt
