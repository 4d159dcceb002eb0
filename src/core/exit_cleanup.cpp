// The registry of files to remove on an aborting exit (see exit_cleanup.h).
#include "core/exit_cleanup.h"

#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <vector>

namespace mt::exit_cleanup {
namespace {

std::mutex mutex;
std::vector<std::string>& registered() {
  static std::vector<std::string> paths;
  return paths;
}

}  // namespace

void remove_on_abort(const std::string& path) {
  std::lock_guard lock(mutex);
  registered().push_back(path);
}

void forget(const std::string& path) {
  std::lock_guard lock(mutex);
  std::erase(registered(), path);
}

void remove_registered() {
  std::lock_guard lock(mutex);
  for (const std::string& path : registered()) ::unlink(path.c_str());
  registered().clear();
}

}  // namespace mt::exit_cleanup
