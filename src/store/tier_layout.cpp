// The state tier's placement and the checks of its paths (see tier_layout.h).
#include "store/tier_layout.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "core/error.h"
#include "dist/numa_binding.h"
#include "store/host_store.h"
#include "store/shared_memory_check.h"

namespace mt {
namespace {

int64_t padded(int64_t n) { return (n + HostStore::kSliceAlign - 1) / HostStore::kSliceAlign * HostStore::kSliceAlign; }

std::string bytes_text(int64_t bytes) {
  return fmt::format("{} ({} bytes)", format_bytes(static_cast<uint64_t>(std::max<int64_t>(bytes, 0))), bytes);
}

int read_int_file(const std::filesystem::path& file) {
  std::ifstream in(file);
  int v = -1;
  return in >> v ? v : -1;
}

}  // namespace

int64_t TierLayout::total_bytes() const {
  int64_t n = 0;
  for (int64_t b : file_bytes) n += b;
  return n;
}

int path_numa_node(const std::string& dir) {
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) return -1;
  std::error_code ec;
  std::filesystem::path at = std::filesystem::canonical(
      fmt::format("/sys/dev/block/{}:{}", major(st.st_dev), minor(st.st_dev)), ec);
  for (; !ec && at.string().starts_with("/sys/devices/") && at.has_parent_path(); at = at.parent_path()) {
    for (const auto& f : {at / "numa_node", at / "device" / "numa_node"})
      if (std::filesystem::exists(f, ec)) return read_int_file(f);
  }
  return -1;
}

std::vector<int> tier_paths_of_rank(const std::vector<std::string>& paths, int rank, int ranks) {
  std::vector<int> all, mine;
  for (int i = 0; i < static_cast<int>(paths.size()); ++i) all.push_back(i);
  if (paths.size() < 2) return all;
  const std::vector<dist::DomainInfo> domains = dist::numa_domain_list();
  if (domains.size() < 2) return all;
  std::vector<int> cores;
  for (const dist::DomainInfo& d : domains) cores.push_back(d.cores);
  std::vector<int> nodes;
  for (int d : dist::plan_rank_share(rank, ranks, cores).domains) nodes.push_back(domains[static_cast<size_t>(d)].os_index);
  for (int i : all)
    if (std::find(nodes.begin(), nodes.end(), path_numa_node(paths[static_cast<size_t>(i)])) != nodes.end())
      mine.push_back(i);
  return mine.empty() ? all : mine;
}

std::filesystem::path tier_file_path(const std::string& dir, const std::string& tag, int rank) {
  return std::filesystem::path(dir) / fmt::format("megatrain-tier-{}-rank{}.bin", tag, rank);
}

TierLayout make_tier_layout(const ParamLayout& layout, const TierSettings& settings, int rank, int ranks) {
  TierLayout t;
  t.mode = settings.mode;
  const int64_t kinds = offloaded_kinds(settings.mode);
  if (kinds == 0) return t;
  MT_REQUIRE(!settings.paths.empty(), "store.offload: {} needs store.offload_paths (one or more directories)",
             offload_mode_name(settings.mode));
  for (int i : tier_paths_of_rank(settings.paths, rank, ranks)) {
    t.files.push_back(tier_file_path(settings.paths[static_cast<size_t>(i)], settings.tag, rank));
    t.file_bytes.push_back(0);
  }
  int64_t u = 0;
  for (size_t r = 0; r < layout.regions.size(); ++r) {
    const HostStore::Slice s = HostStore::slice_of(layout.regions[r].numel, rank, ranks);
    for (int64_t b = s.begin; b < s.end; b += TierLayout::kUnitElements, ++u) {
      TierUnit unit;
      unit.region = static_cast<int64_t>(r);
      unit.begin = b;
      unit.end = std::min(s.end, b + TierLayout::kUnitElements);
      unit.file = static_cast<int>(u % static_cast<int64_t>(t.files.size()));
      unit.kind_stride = padded(unit.end - unit.begin);
      unit.offset = t.file_bytes[static_cast<size_t>(unit.file)];
      unit.bytes = kinds * unit.kind_stride * 4;
      t.file_bytes[static_cast<size_t>(unit.file)] += unit.bytes;
      t.largest_unit_bytes = std::max(t.largest_unit_bytes, unit.bytes);
      t.units.push_back(unit);
    }
  }
  return t;
}

int64_t tier_bytes_in_memory(const ParamLayout& layout, const TierSettings& settings, int ranks) {
  if (settings.mode == OffloadMode::none) return 0;
  int64_t bytes = 0;
  for (int q = 0; q < ranks; ++q) {
    const TierLayout t = make_tier_layout(layout, settings, q, ranks);
    for (size_t f = 0; f < t.files.size(); ++f) {
      struct statfs fs {};
      if (statfs(t.files[f].parent_path().c_str(), &fs) != 0) continue;
      if (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC) bytes += t.file_bytes[f];
    }
  }
  return bytes;
}

bool allows_direct_io(const std::string& dir) {
  const std::filesystem::path probe = std::filesystem::path(dir) / fmt::format(".megatrain-direct-probe-{}", getpid());
  const int fd = open(probe.c_str(), O_CREAT | O_RDWR | O_DIRECT, 0600);
  if (fd >= 0) close(fd);
  std::error_code ec;
  std::filesystem::remove(probe, ec);
  return fd >= 0;
}

std::string tier_path_shortfall(const ParamLayout& layout, const TierSettings& settings, int ranks) {
  if (settings.mode == OffloadMode::none) return {};
  if (settings.paths.empty())
    return fmt::format("store.offload: {} needs store.offload_paths (one or more directories)",
                       offload_mode_name(settings.mode));
  // Bytes per path (as written), every rank's files together; the stale files they replace.
  std::map<std::string, int64_t> need, stale;
  for (int q = 0; q < ranks; ++q) {
    const TierLayout t = make_tier_layout(layout, settings, q, ranks);
    for (size_t f = 0; f < t.files.size(); ++f) {
      const std::string dir = t.files[f].parent_path().string();
      need[dir] += t.file_bytes[f];
      std::error_code ec;
      const auto size = std::filesystem::file_size(t.files[f], ec);
      if (!ec) stale[dir] += static_cast<int64_t>(size);
    }
  }
  for (const std::string& dir : settings.paths) {
    const int64_t bytes = need[dir];
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec))
      return fmt::format("store.offload_paths: {}: no such directory (the tier needs {} there)", dir, bytes_text(bytes));
    const std::filesystem::path probe = std::filesystem::path(dir) / fmt::format(".megatrain-write-probe-{}", getpid());
    const int fd = open(probe.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
    if (fd < 0)
      return fmt::format("store.offload_paths: {}: not writable ({}); the tier needs {} there", dir,
                         std::strerror(errno), bytes_text(bytes));
    close(fd);
    std::filesystem::remove(probe, ec);
    struct statvfs vfs {};
    if (statvfs(dir.c_str(), &vfs) != 0 || vfs.f_blocks == 0) continue;  // no size (ramfs): fallocate will tell
    const int64_t available = static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize) + stale[dir];
    if (bytes > available)
      return fmt::format("store.offload_paths: {}: {} needed for the tier files of {} rank(s), {} available", dir,
                         bytes_text(bytes), ranks, bytes_text(available));
  }
  return {};
}

}  // namespace mt
