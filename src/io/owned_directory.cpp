// Writing a directory whole and replacing only our own (see owned_directory.h).
#include "io/owned_directory.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>
#include <vector>

#include "core/error.h"
#include "core/json_depth.h"
#include "core/log.h"
#include "core/os_error.h"

namespace mt {
namespace {

namespace fs = std::filesystem;

void fsync_dir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: the files themselves are durable
  ::fsync(fd);
  ::close(fd);
}

// The process's umask, read without changing it (umask(2) sets it while reading: a race with other threads).
mode_t current_umask() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "Umask:") {
      unsigned mask = 022;
      in >> std::oct >> mask;
      return static_cast<mode_t>(mask);
    }
    std::getline(in, key);
  }
  return 022;  // a kernel without the field: the usual umask
}

// The files a manifest of `dir` lists; empty when it has none or it does not parse.
std::set<std::string> manifest_files(const fs::path& dir) {
  std::ifstream in(dir / kManifestName);
  if (!in) return {};
  const std::string text(std::istreambuf_iterator<char>(in), {});
  try {
    require_json_depth(text, (dir / kManifestName).string());
    const nlohmann::json j = nlohmann::json::parse(text);
    std::set<std::string> files{kManifestName};
    for (const auto& f : j.at("files")) files.insert(f.get<std::string>());
    return files;
  } catch (const std::exception&) {
    return {};
  }
}

// What replacing the existing `target` would remove: the files of our manifest; throws when it may not.
struct Existing {
  bool present = false;
  bool ours = false;  // remove exactly `files`; otherwise (Replace::any) the whole directory
  std::set<std::string> files;
};

Existing inspect_target(const fs::path& target, Replace replace, const std::string& what) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(target, ec);
  Existing e;
  if (!fs::exists(st)) return e;
  MT_REQUIRE(fs::is_directory(st), "{} {}: exists and is not a directory; megatrain does not replace it", what,
             target.string());
  std::vector<std::string> entries;
  for (const auto& entry : fs::directory_iterator(target, ec)) entries.push_back(entry.path().filename().string());
  MT_REQUIRE(!ec, "{} {}: cannot list: {}", what, target.string(), ec.message());
  if (entries.empty()) {
    e.present = true;
    e.ours = true;
    return e;
  }
  const std::set<std::string> listed = manifest_files(target);
  std::string foreign;
  for (const std::string& name : entries)
    if (!listed.count(name)) foreign = name;
  const bool ours = !listed.empty() && foreign.empty();
  if (replace == Replace::none)
    MT_REQUIRE(false, "{} {}: the directory exists and is not empty{}; pass --overwrite to replace it", what,
               target.string(), ours ? " (an earlier export)" : "");
  if (replace == Replace::ours)
    MT_REQUIRE(ours, "{} {}: the directory holds '{}', which megatrain did not write (no {} lists it); move it away "
               "or choose another directory", what, target.string(), foreign.empty() ? entries.front() : foreign,
               kManifestName);
  e.present = true;
  e.ours = ours;
  e.files = ours ? listed : std::set<std::string>{};
  return e;
}

void write_manifest(const fs::path& dir) {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) files.push_back(entry.path().filename().string());
  std::sort(files.begin(), files.end());
  const nlohmann::json j = {{"written_by", "megatrain " MEGATRAIN_VERSION}, {"files", files}};
  write_file_durably(dir / kManifestName, j.dump(2) + "\n");
}

}  // namespace

void write_file_durably(const fs::path& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  MT_REQUIRE(fd >= 0, "{}: cannot create {}", os_error_first(errno), path.string());
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int why = w == 0 ? ENOSPC : errno;
      ::close(fd);
      MT_REQUIRE(false, "{}: writing {} failed after {} of {} bytes", os_error_first(why), path.string(), done,
                 text.size());
    }
    done += static_cast<size_t>(w);
  }
  const bool synced = ::fsync(fd) == 0;
  const int why = errno;
  const bool closed = ::close(fd) == 0;
  MT_REQUIRE(synced && closed, "{}: {} failed after writing {} bytes: {}", path.string(), synced ? "close" : "fsync",
             text.size(), std::strerror(synced ? errno : why));
}

void require_replaceable(const fs::path& target, Replace replace, const std::string& what) {
  inspect_target(target, replace, what);
}

void write_owned_directory(const fs::path& target, Replace replace, const std::string& what,
                           const std::function<void(const fs::path& dir)>& write_files) {
  const Existing existing = inspect_target(target, replace, what);
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(parent, ec);
  MT_REQUIRE(!ec, "{} {}: cannot create {}: {}", what, target.string(), parent.string(), ec.message());
  std::string pattern = (parent / (target.filename().string() + ".tmp-XXXXXX")).string();
  MT_REQUIRE(::mkdtemp(pattern.data()) != nullptr, "{} {}: cannot create a temporary directory {}: {}", what,
             target.string(), pattern, std::strerror(errno));
  const fs::path tmp = pattern;
  // mkdtemp makes it 0700; the directory it becomes is what mkdir would have made (0755 under the usual umask).
  ::chmod(tmp.c_str(), 0777 & ~current_umask());
  try {
    write_files(tmp);
    write_manifest(tmp);
    fsync_dir(tmp);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  // The earlier directory moves aside first, so that a crash leaves a complete directory under one of the names.
  const fs::path old = target.string() + ".old-" + std::to_string(::getpid());
  if (existing.present) {
    fs::rename(target, old, ec);
    if (ec) {
      const std::string why = ec.message();
      fs::remove_all(tmp, ec);
      MT_REQUIRE(false, "{} {}: cannot move the earlier directory aside: {}", what, target.string(), why);
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    const std::string why = ec.message();
    fs::remove_all(tmp, ec);
    if (existing.present) fs::rename(old, target, ec);
    MT_REQUIRE(false, "{} {}: cannot rename {} into place: {}", what, target.string(), tmp.string(), why);
  }
  if (existing.present) {
    // Ours: exactly what its manifest lists, then the directory if nothing else came meanwhile. Replace::any: all.
    if (existing.ours) {
      for (const std::string& name : existing.files) fs::remove(old / name, ec);
      fs::remove(old, ec);
      if (ec) log::warn("{} {}: left {} in place: it holds files megatrain did not write", what, target.string(), old.string());
    } else {
      fs::remove_all(old, ec);
    }
  }
  fsync_dir(parent);
}

}  // namespace mt
