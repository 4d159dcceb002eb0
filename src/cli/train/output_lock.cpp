// The output directory's run lock (see output_lock.h).
#include "cli/train/output_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include "core/error.h"
#include "core/log.h"
#include "core/os_error.h"

namespace mt {
namespace {

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

// The holder's "pid N host H" line, as the file holds it ("(unreadable)" when it does not).
std::string holder_of(int fd) {
  char text[512] = {};
  const ssize_t n = ::pread(fd, text, sizeof(text) - 1, 0);
  std::string line = n > 0 ? std::string(text, static_cast<size_t>(n)) : std::string();
  if (const size_t end = line.find('\n'); end != std::string::npos) line.resize(end);
  return line.empty() ? std::string("a run that has not written its pid yet") : line;
}

bool same_file(int fd, const std::filesystem::path& path) {
  struct stat held {}, named {};
  return ::fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
         held.st_ino == named.st_ino;
}

}  // namespace

OutputDirLock::OutputDirLock(const std::filesystem::path& output_dir)
    : dir_(output_dir), file_(output_dir / kOutputLockName) {
  std::error_code ec;
  created_dir_ = std::filesystem::create_directories(dir_, ec);
  MT_REQUIRE(!ec, "{}: cannot create training.output_dir {}", ec.message(), dir_.string());
  for (int attempt = 0; fd_ < 0; ++attempt) {
    const int fd = ::open(file_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    MT_REQUIRE(fd >= 0, "{}: cannot create the run lock {}", os_error_first(errno), file_.string());
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int why = errno;
      const std::string holder = holder_of(fd);
      ::close(fd);
      MT_REQUIRE(why != EWOULDBLOCK, "another run is using training.output_dir {} ({}, lock file {}); wait for it to "
                 "end or choose another output_dir", dir_.string(), holder, file_.string());
      MT_REQUIRE(false, "{}: cannot lock the run lock {}", os_error_first(why), file_.string());
    }
    if (same_file(fd, file_)) {
      fd_ = fd;
    } else {  // won on a file its holder unlinked as it ended: the path names a new one now
      ::close(fd);
      MT_REQUIRE(attempt < 100, "cannot hold the run lock {}: it is replaced as fast as it is taken", file_.string());
    }
  }
  // Who holds it, for the message of a refused run; the lock itself is the flock (a full disk only loses the line).
  const std::string line = "pid " + std::to_string(::getpid()) + " on host " + host_name() + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size()))
    log::warn("{}: the run lock {} does not name this run", os_error_first(errno), file_.string());
}

OutputDirLock::~OutputDirLock() {
  ::unlink(file_.c_str());
  ::close(fd_);
  std::error_code ec;
  if (created_dir_ && std::filesystem::is_empty(dir_, ec)) std::filesystem::remove(dir_, ec);
}

}  // namespace mt
