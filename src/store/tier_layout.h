// Where the state tier keeps each rank's offloaded state: which of store.offload_paths a rank uses (the paths on
// its NUMA domain's devices, or all of them), its one file per path, and the records in them. A rank's slice of a
// region is cut into units of at most kUnitElements; unit u of the rank goes to its file u mod (files), and holds
// the offloaded kinds one after another (master, exp_avg, exp_avg_sq, as the mode has them), each padded to
// HostStore::kSliceAlign elements. Invariants: every unit's offset and size are multiples of 16 KiB (what O_DIRECT
// needs); the layout is a pure function of (layout, settings, rank, ranks), so any rank can find any rank's units.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/runtime_switches.h"
#include "model/param_layout.h"
#include "store/offload_mode.h"

namespace mt {

struct TierSettings {
  OffloadMode mode = OffloadMode::none;
  std::vector<std::string> paths;   // store.offload_paths
  std::string tag = "run";          // names the files (one run's restart finds its own stale files)
  TierIoChoice io = TierIoChoice::automatic;  // the tier_io switch (TierIo::create)
  bool operator==(const TierSettings&) const = default;
};

struct TierUnit {
  int64_t region = 0;
  int64_t begin = 0, end = 0;       // elements of the region
  int file = 0;                     // index into TierLayout::files
  int64_t offset = 0;               // bytes
  int64_t kind_stride = 0;          // elements between two kinds' parts (the padded length)
  int64_t bytes = 0;                // every kind's part
};

struct TierLayout {
  static constexpr int64_t kUnitElements = int64_t{16} << 20;  // 192 MiB of state with 3 kinds
  OffloadMode mode = OffloadMode::none;
  std::vector<std::filesystem::path> files;
  std::vector<int64_t> file_bytes;
  std::vector<TierUnit> units;      // region order, then element order
  int64_t largest_unit_bytes = 0;
  int64_t total_bytes() const;
};

// Indexes into paths of the ones node rank `rank` of `ranks` uses: those whose device sits on a NUMA node that the
// rank's share of the node (dist::plan_rank_share) includes; all of them where none does or it is unknown.
std::vector<int> tier_paths_of_rank(const std::vector<std::string>& paths, int rank, int ranks);
std::filesystem::path tier_file_path(const std::string& dir, const std::string& tag, int rank);
TierLayout make_tier_layout(const ParamLayout& layout, const TierSettings& settings, int rank, int ranks);

// Checks every path before anything is allocated: it exists, is a writable directory, and has room for the files
// of every rank that uses it (stale files of the same tag, which the run replaces, count as room). Empty when all
// pass; else one line naming the path and the bytes needed and available.
std::string tier_path_shortfall(const ParamLayout& layout, const TierSettings& settings, int ranks);
// Bytes of every rank's tier files that land on a RAM file system (tmpfs, ramfs): RAM, not NVMe.
int64_t tier_bytes_in_memory(const ParamLayout& layout, const TierSettings& settings, int ranks);
// Whether `dir` allows O_DIRECT (a probe file is created, opened and removed).
bool allows_direct_io(const std::string& dir);
// The NUMA node of the device holding `dir` (sysfs), -1 when unknown.
int path_numa_node(const std::string& dir);

}  // namespace mt
