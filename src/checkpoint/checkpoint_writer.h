// Saving a checkpoint: one HDF5 file written collectively by every rank of the job with MPI-IO, each rank
// writing the hyperslabs of its own HostStore slices (fp32 master, exp_avg, exp_avg_sq under the HF tensor
// names, in their HF shapes) and every rank the same /meta attributes (DESIGN.md §6).
// Invariant: the file is complete under its final name or absent — it is written as "<name>.tmp", closed by
// every rank, and renamed by rank 0 after a barrier; a crash before that leaves older checkpoints untouched.
#pragma once
#include <cstdint>
#include <filesystem>

#include "checkpoint/checkpoint_meta.h"
#include "store/host_store.h"

namespace mt {

struct SaveReport {
  int64_t bytes = 0;      // tensor bytes in the file (every rank's)
  double seconds = 0.0;   // from open to rename
};

// Collective over the world communicator; every rank's optimizer must be idle. `path` and `meta` are taken
// from world rank 0 (broadcast); other ranks may pass anything.
SaveReport save_checkpoint(const std::filesystem::path& path, HostStore& store, const CheckpointMeta& meta);

// Rank 0: deletes the oldest step-*.h5 in `dir` beyond the newest `keep` (keep <= 0: keeps all).
void prune_checkpoints(const std::filesystem::path& dir, int64_t keep);

}  // namespace mt
