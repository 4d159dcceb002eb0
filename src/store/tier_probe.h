// The state tier's disk ceiling: a quick probe that writes then reads `bytes` per path (at least 1 MiB) (one file each, all paths at
// once, O_DIRECT where allowed, through the same TierIo and chunking as the tier) and reports the aggregate GB/s.
// Invariant: measures, never asserts; the probe files are removed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/runtime_switches.h"

namespace mt {

struct DiskCeiling {
  double write_gbs = 0.0, read_gbs = 0.0;
  bool direct = true;
  std::string io;   // "io_uring" or "threads"
  // A step's mix: each state byte read once and written once, one after the other on the same devices.
  double mixed_gbs() const { return write_gbs > 0 && read_gbs > 0 ? 2.0 / (1.0 / write_gbs + 1.0 / read_gbs) : 0.0; }
};

DiskCeiling measure_disk_ceiling(const std::vector<std::string>& paths, int64_t bytes_per_path, TierIoChoice io);

}  // namespace mt
