// CheckpointSaver: every rank's part of the saves during training (DESIGN.md §6). With every optimizer idle,
// each rank copies its slices of master, exp_avg and exp_avg_sq into a private snapshot (the training stall),
// and the collective write of the snapshot (.tmp, close, barrier, rename, prune) runs on a background thread
// of every rank while training continues; when the snapshot does not fit in MemAvailable minus a margin, the
// save is written synchronously from the store instead (logged).
// Invariants: at most one save in flight; save(), wait() and the destructor first wait for it; a background
// save's thread makes this process's only HDF5 calls and its MPI calls are on the node communicator, which
// training never uses while it runs (data-parallel reductions have their own). Only the first node saves:
// every node holds the same replica.
#pragma once
#include <cstdint>
#include <filesystem>
#include <thread>

#include "checkpoint/checkpoint_meta.h"
#include "store/host_store.h"

namespace mt {

class CheckpointSaver {
 public:
  explicit CheckpointSaver(HostStore& store) : store_(store) {}
  ~CheckpointSaver() { wait(); }
  CheckpointSaver(const CheckpointSaver&) = delete;
  CheckpointSaver& operator=(const CheckpointSaver&) = delete;

  // Collective over the node's ranks (the first node's), every rank's optimizer idle. `path`, `meta` and `keep` (save_total_limit) are
  // world rank 0's; other ranks may pass anything. Returns once training may go on. background = false on any
  // rank (rank 0 passes it for the run's last save: nothing is left to overlap) writes synchronously.
  void save(const std::filesystem::path& path, const CheckpointMeta& meta, int64_t keep, bool background = true);
  // Until the save in flight (if any) is complete on this rank — which it is on every rank once it is here.
  void wait();

 private:
  HostStore& store_;
  std::thread thread_;
};

}  // namespace mt
