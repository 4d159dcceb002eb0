// Snapshot, then write in the background (see checkpoint_saver.h).
#include "cli/train/checkpoint_saver.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <memory>
#include <string>

#include "checkpoint/checkpoint_writer.h"
#include "core/error.h"
#include "core/fault_hooks.h"
#include "core/log.h"
#include "dist/check.h"
#include "dist/context.h"
#include "store/shared_memory_check.h"

namespace mt {
namespace {

// /proc/meminfo's value of `key` in bytes; -1 when absent.
int64_t meminfo_bytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string name, unit;
  int64_t kib = 0;
  while (in >> name >> kib) {
    std::getline(in, unit);
    if (name == key + ":") return kib * 1024;
  }
  return -1;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

void CheckpointSaver::wait() {
  if (thread_.joinable()) thread_.join();
}

void CheckpointSaver::save(const std::filesystem::path& path, const CheckpointMeta& meta, int64_t keep,
                           bool background) {
  wait();  // the previous save, on every rank (its last call is a barrier)
  store_.sync_resident();  // GPU-resident regions' state into the store (every optimizer is idle)
  const dist::Context& ctx = dist::context();
  // The node's snapshots together: 12 bytes per parameter (one node per job); the margin leaves room for the
  // page cache and everything else. Test hook: fault_hooks().sync_save.
  const int64_t need = store_.layout().total_numel * 12;
  const int64_t available = meminfo_bytes("MemAvailable"), total = meminfo_bytes("MemTotal");
  const int64_t margin = std::max<int64_t>(int64_t{1} << 30, total / 10);
  const bool forced_sync = fault_hooks().sync_save;
  const bool fits = available >= 0 && need <= available - margin;
  int go = background && !forced_sync && fits ? 1 : 0, all_go = 0;
  MT_CHECK_MPI(MPI_Allreduce(&go, &all_go, 1, MPI_INT, MPI_MIN, ctx.node));

  if (!all_go) {
    if (ctx.is_root())
      log::info("checkpoint step {}: saving synchronously ({})", meta.step,
                !background ? std::string("the run's last save: nothing left to overlap")
                : forced_sync ? std::string("MEGATRAIN_TEST_SYNC_SAVE")
                              : fmt::format("a snapshot of {} does not fit in MemAvailable {} minus a "
                                          "margin of {}",
                                          format_bytes(static_cast<uint64_t>(need)),
                                          format_bytes(static_cast<uint64_t>(std::max<int64_t>(available, 0))),
                                          format_bytes(static_cast<uint64_t>(margin))));
    const SaveReport saved = save_checkpoint(path, store_source(store_), meta, keep);
    if (ctx.is_root())
      log::info("saved checkpoint {} (step {}): {} in {:.3f} s, {:.2f} GB/s (synchronous: the training stall)",
                path.string(), meta.step, format_bytes(static_cast<uint64_t>(saved.bytes)), saved.seconds,
                static_cast<double>(saved.bytes) / 1e9 / saved.seconds);
    return;
  }

  const auto t0 = std::chrono::steady_clock::now();
  auto snapshot = std::make_shared<const CheckpointSnapshot>(store_);
  // Every rank holds its snapshot (and has taken the checkpoint message) before rank 0 posts the next step.
  MT_CHECK_MPI(MPI_Barrier(ctx.node));
  const double stall = seconds_since(t0);
  if (ctx.is_root())
    log::info("checkpoint step {}: snapshot of {} in {:.3f} s (the training stall), {:.2f} GB/s; writing {} in the "
              "background",
              meta.step, format_bytes(static_cast<uint64_t>(need)), stall, static_cast<double>(need) / 1e9 / stall,
              path.string());
  thread_ = std::thread([snapshot = std::move(snapshot), path, meta, keep]() mutable {
    try {
      // Test hook (core/fault_hooks.h): the background write starts this many seconds late.
      if (const double slow = fault_hooks().slow_save_seconds; slow > 0)
        std::this_thread::sleep_for(std::chrono::duration<double>(slow));
      const SaveReport saved = save_checkpoint(path, snapshot->source(), meta, keep);
      snapshot.reset();
      if (dist::context().is_root())
        log::info("saved checkpoint {} (step {}): {} in {:.3f} s, {:.2f} GB/s (in the background)", path.string(),
                  meta.step, format_bytes(static_cast<uint64_t>(saved.bytes)), saved.seconds,
                  static_cast<double>(saved.bytes) / 1e9 / saved.seconds);
    } catch (const std::exception& e) {
      dist::abort_job(e.what());
    }
  });
}

}  // namespace mt
