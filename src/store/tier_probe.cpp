// Disk ceiling probe (see tier_probe.h).
#include "store/tier_probe.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "store/tier_io.h"

namespace mt {

DiskCeiling measure_disk_ceiling(const std::vector<std::string>& paths, int64_t bytes_per_path,
                                 TierIoChoice io_choice) {
  // One buffer written and read again and again (the device, not RAM, is timed): 64 MiB, or less for a small probe.
  constexpr int64_t kMiB = int64_t{1} << 20;
  const int64_t kBuffer = std::clamp<int64_t>((bytes_per_path + kMiB - 1) / kMiB * kMiB, kMiB, 64 * kMiB);
  const int64_t bytes = (std::max(bytes_per_path, kBuffer) + kBuffer - 1) / kBuffer * kBuffer;
  DiskCeiling c;
  std::unique_ptr<TierIo> io = TierIo::create(io_choice);
  c.io = io->name();
  void* buffer = mmap(nullptr, kBuffer, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  MT_REQUIRE(buffer != MAP_FAILED, "disk probe: cannot map {} bytes", kBuffer);
  std::memset(buffer, 0x5a, kBuffer);
  std::vector<std::string> names;
  std::vector<int> fds;
  for (const std::string& dir : paths) {
    names.push_back((std::filesystem::path(dir) / fmt::format(".megatrain-disk-probe-{}", getpid())).string());
    int fd = open(names.back().c_str(), O_CREAT | O_RDWR | O_TRUNC | O_DIRECT, 0600);
    if (fd < 0) {
      c.direct = false;
      fd = open(names.back().c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
    }
    MT_REQUIRE(fd >= 0, "disk probe: {}: cannot create: {}", names.back(), std::strerror(errno));
    MT_REQUIRE(fallocate(fd, 0, 0, bytes) == 0 || errno == EOPNOTSUPP, "disk probe: {}: cannot preallocate {} bytes: {}",
               names.back(), bytes, std::strerror(errno));
    fds.push_back(fd);
  }
  auto pass = [&](bool write) {
    const auto t0 = std::chrono::steady_clock::now();
    TierBatch batch;
    for (int64_t at = 0; at < bytes; at += kBuffer)
      for (size_t f = 0; f < fds.size(); ++f) io->submit({fds[f], buffer, kBuffer, at, write, &names[f]}, batch);
    io->wait(batch);
    if (write)
      for (int fd : fds) fdatasync(fd);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return static_cast<double>(bytes) * static_cast<double>(fds.size()) / s / 1e9;
  };
  c.write_gbs = pass(true);
  c.read_gbs = pass(false);
  for (size_t f = 0; f < fds.size(); ++f) {
    close(fds[f]);
    std::filesystem::remove(names[f]);
  }
  munmap(buffer, kBuffer);
  return c;
}

}  // namespace mt
