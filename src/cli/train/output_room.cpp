// The output directory's room for a checkpoint (see output_room.h).
#include "cli/train/output_room.h"

#include <sys/statvfs.h>

#include "core/log.h"
#include "store/shared_memory_check.h"

namespace mt {

int64_t free_bytes_for(const std::filesystem::path& dir) {
  std::filesystem::path at = std::filesystem::absolute(dir);
  std::error_code ec;
  while (!std::filesystem::exists(at, ec) && at.has_parent_path() && at.parent_path() != at) at = at.parent_path();
  struct statvfs fs {};
  if (::statvfs(at.c_str(), &fs) != 0) return -1;
  return static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
}

void warn_if_no_room_for_checkpoint(const std::filesystem::path& output_dir, int64_t checkpoint_bytes) {
  const int64_t free = free_bytes_for(output_dir);
  if (free < 0 || free >= checkpoint_bytes) return;
  log::warn("training.output_dir {}: its file system has {} free, less than one checkpoint ({}); saving will fail "
            "with 'No space left on device'",
            output_dir.string(), format_bytes(static_cast<uint64_t>(free)),
            format_bytes(static_cast<uint64_t>(checkpoint_bytes)));
}

}  // namespace mt
