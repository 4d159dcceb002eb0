// statvfs-based check of the shared-memory filesystem (see shared_memory_check.h).
#include "store/shared_memory_check.h"

#include <sys/statvfs.h>

#include <cstdlib>

#include "core/error.h"

namespace mt {

std::string shared_memory_dir() {
  const char* dir = std::getenv("OMPI_MCA_osc_sm_backing_directory");
  return dir && *dir ? dir : "/dev/shm";
}

std::string format_bytes(uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes >= (1ull << 30)) return fmt::format("{:.2f} GiB", b / double(1ull << 30));
  if (bytes >= (1ull << 20)) return fmt::format("{:.1f} MiB", b / double(1ull << 20));
  if (bytes >= (1ull << 10)) return fmt::format("{:.1f} KiB", b / double(1ull << 10));
  return fmt::format("{} B", bytes);
}

std::string shared_memory_shortage(const std::string& dir, uint64_t needed, uint64_t available, int ranks) {
  if (needed <= available) return "";
  return fmt::format("host store: {} has {} free, but the store's shared-memory window for {} ranks needs {}; "
                     "enlarge it (mount -o remount,size=... {}, docker --shm-size) or set "
                     "OMPI_MCA_osc_sm_backing_directory to a larger tmpfs",
                     dir, format_bytes(available), ranks, format_bytes(needed), dir);
}

void require_shared_memory(uint64_t needed, int ranks) {
  const std::string dir = shared_memory_dir();
  struct statvfs fs {};
  MT_REQUIRE(statvfs(dir.c_str(), &fs) == 0, "host store: cannot read the free space of {} (the backing directory "
             "of MPI shared memory; set OMPI_MCA_osc_sm_backing_directory)", dir);
  const std::string shortage =
      shared_memory_shortage(dir, needed, static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize, ranks);
  MT_REQUIRE(shortage.empty(), "{}", shortage);
}

}  // namespace mt
