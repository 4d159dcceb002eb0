// The state tier's files and staging (see state_tier.h).
#include "store/state_tier.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/exit_cleanup.h"
#include "core/fault_hooks.h"
#include "core/log.h"
#include "core/tensor_checksum.h"
#include "core/os_error.h"
#include "store/host_store.h"
#include "store/shared_memory_check.h"

namespace mt {
namespace {

// Page-aligned anonymous memory, page-locked where the limit allows (advice otherwise: the I/O still works).
float* map_staging(size_t bytes, bool& locked) {
  void* p = mmap(nullptr, std::max<size_t>(bytes, 4096), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  MT_REQUIRE(p != MAP_FAILED, "state tier: cannot map {} bytes of staging memory", bytes);
  locked = locked && mlock(p, bytes) == 0;
  return static_cast<float*>(p);
}

int open_tier_file(const std::string& name, bool create, bool& direct) {
  const int flags = O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0);
  int fd = direct ? open(name.c_str(), flags | O_DIRECT, 0600) : -1;
  if (fd < 0 && (!direct || errno == EINVAL)) {
    // Some file systems (ramfs) create the file before they refuse O_DIRECT: the retry opens what exists.
    const bool tried_direct = direct;
    direct = false;
    fd = open(name.c_str(), tried_direct ? flags & ~O_EXCL : flags, 0600);
  }
  MT_REQUIRE(fd >= 0, "{}: state tier: cannot {} {}", os_error_first(errno), create ? "create" : "open", name);
  return fd;
}

}  // namespace

StateTier::StateTier(const ParamLayout& layout, const TierSettings& settings, int rank, int ranks)
    : param_layout_(layout), settings_(settings), rank_(rank), ranks_(ranks), io_(TierIo::create(settings.io)) {
  MT_ASSERT(settings.mode != OffloadMode::none);
  if (rank == 0) remove_files_of_absent_ranks();
  own_.layout = make_tier_layout(layout, settings, rank, ranks);
  // An aborted job removes the node's tier files (core/exit_cleanup.h): rank 0 every rank's, as the abort may end
  // the others before they unwind.
  for (int q = rank == 0 ? 0 : rank; q < (rank == 0 ? ranks : rank + 1); ++q)
    for (const std::string& dir : settings.paths) exit_cleanup::remove_on_abort(tier_file_path(dir, settings.tag, q).string());
  for (size_t f = 0; f < own_.layout.files.size(); ++f) {
    const std::string name = own_.layout.files[f].string();
    std::error_code ec;
    if (std::filesystem::exists(name, ec)) {
      std::filesystem::remove(name, ec);
      log::warn("state tier: removed {} (left by a run that did not end cleanly; the tier is rebuilt from the "
                "checkpoint or the initial weights)", name);
    }
    bool direct = direct_;
    const int fd = open_tier_file(name, true, direct);
    own_.names.push_back(name);
    own_.fds.push_back(fd);
    if (!direct && direct_ && rank == 0)
      log::info("state tier: {} does not allow O_DIRECT; buffered I/O there (the page cache holds copies)", name);
    direct_ = direct_ && direct;
    const int64_t bytes = own_.layout.file_bytes[f];
    if (bytes == 0) continue;
    int rc = fallocate(fd, 0, 0, bytes);
    if (rc != 0 && errno == EOPNOTSUPP) {
      errno = posix_fallocate(fd, 0, bytes);  // it returns its error rather than setting errno
      rc = errno == 0 ? 0 : -1;
    }
    if (rc != 0) {
      const int why = errno;
      struct statvfs vfs {};
      const int64_t available = statvfs(name.c_str(), &vfs) == 0
                                    ? static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize) : -1;
      // The constructor does not complete, so the destructor will not remove what it created: removed here.
      for (size_t g = 0; g < own_.names.size(); ++g) {
        close(own_.fds[g]);
        std::filesystem::remove(own_.names[g], ec);
      }
      throw Error(fmt::format("{}: state tier: cannot preallocate {} bytes ({}) for {}; {} bytes available; the "
                              "tier's files are removed", os_error_first(why), bytes,
                              format_bytes(static_cast<uint64_t>(bytes)), name, available));
    }
  }
  staging_bytes_ = static_cast<size_t>(own_.layout.largest_unit_bytes);
  bool locked = true;
  for (int b = 0; b < kStaging; ++b) buffers_.push_back(map_staging(staging_bytes_, locked));
  sync_elements_ = sync_elements(layout, ranks);
  sync_ = map_staging(static_cast<size_t>(sync_elements_) * 4, locked);
  batches_.resize(kStaging);
  in_flight_.resize(kStaging);
  parts_ = static_cast<int>(offloaded_kinds(settings.mode));
  part_sums_.assign(own_.layout.units.size() * static_cast<size_t>(parts_), 0);
  part_known_.assign(part_sums_.size(), 0);
  if (!locked && rank == 0)
    log::info("state tier: staging buffers not page-locked (RLIMIT_MEMLOCK); they stay in RAM unless it runs short");
  fill_after_writes_ = fault_hooks().tier_full_after_writes;
}

StateTier::~StateTier() {
  for (int b = 0; b < kStaging; ++b) {
    if (batches_[static_cast<size_t>(b)].pending == 0) continue;
    try {
      io_->wait(batches_[static_cast<size_t>(b)]);
    } catch (const Error&) {  // the job is ending on another error already
    }
  }
  for (int fd : own_.fds) close(fd);
  for (auto& [q, files] : peers_)
    for (int fd : files.fds) close(fd);
  std::error_code ec;
  for (const std::string& name : own_.names) std::filesystem::remove(name, ec);
  for (int q = rank_ == 0 ? 0 : rank_; q < (rank_ == 0 ? ranks_ : rank_ + 1); ++q)
    for (const std::string& dir : settings_.paths) exit_cleanup::forget(tier_file_path(dir, settings_.tag, q).string());
  for (float* p : buffers_) munmap(p, std::max<size_t>(staging_bytes_, 4096));
  if (sync_) munmap(sync_, std::max<size_t>(static_cast<size_t>(sync_elements_) * 4, 4096));
}

// A crashed run of more ranks than this one left files no rank of this run replaces: node rank 0 removes them.
void StateTier::remove_files_of_absent_ranks() {
  const std::string prefix = fmt::format("megatrain-tier-{}-rank", settings_.tag);
  for (const std::string& dir : settings_.paths) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (!name.starts_with(prefix) || !name.ends_with(".bin")) continue;
      const std::string index = name.substr(prefix.size(), name.size() - prefix.size() - 4);
      if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos || std::stoi(index) < ranks_)
        continue;
      std::filesystem::remove(e.path(), ec);
      log::warn("state tier: removed {} (left by a run of more ranks that did not end cleanly)", e.path().string());
    }
  }
}

int64_t StateTier::sync_elements(const ParamLayout& layout, int ranks) {
  const int64_t slice = HostStore::slice_of(layout.largest_region_numel, 0, ranks).size();
  return std::min(TierLayout::kUnitElements, (slice + HostStore::kSliceAlign - 1) / HostStore::kSliceAlign *
                                                 HostStore::kSliceAlign);
}

int StateTier::part_of(StateKind kind) const {
  if (!kind_offloaded(settings_.mode, kind)) return -1;
  return offloads_master(settings_.mode) ? static_cast<int>(kind) : static_cast<int>(kind) - 1;
}

StateTier::Files& StateTier::files_of(int q) {
  if (q == rank_) return own_;
  auto it = peers_.find(q);
  if (it != peers_.end()) return it->second;
  Files f;
  f.layout = make_tier_layout(param_layout_, settings_, q, ranks_);
  for (const auto& name : f.layout.files) {
    bool direct = direct_;
    f.names.push_back(name.string());
    f.fds.push_back(open_tier_file(name.string(), false, direct));
  }
  return peers_.emplace(q, std::move(f)).first->second;
}

void StateTier::submit(Files& f, const TierUnit& unit, int64_t part, float* buffer, bool write, TierBatch& batch) {
  const int64_t bytes = part < 0 ? unit.bytes : unit.kind_stride * 4;
  TierOp op{f.fds[static_cast<size_t>(unit.file)], buffer, bytes, unit.offset + std::max<int64_t>(part, 0) * unit.kind_stride * 4,
            write, &f.names[static_cast<size_t>(unit.file)]};
  io_->submit(op, batch);
  (write ? bytes_written_ : bytes_read_) += bytes;
}

void StateTier::record_part(size_t u, int part, const float* data) {
  const TierUnit& unit = own_.layout.units[u];
  const size_t at = u * static_cast<size_t>(parts_) + static_cast<size_t>(part);
  part_sums_[at] = tensor_checksum(data, 0, unit.end - unit.begin);
  part_known_[at] = 1;
}

void StateTier::check_part(size_t u, int part, const float* data) const {
  const size_t at = u * static_cast<size_t>(parts_) + static_cast<size_t>(part);
  const TierUnit& unit = own_.layout.units[u];
  if (!part_known_[at] || tensor_checksum(data, 0, unit.end - unit.begin) == part_sums_[at]) return;
  // The tensors whose elements the unit holds (region offsets [begin, end)).
  std::string tensors;
  int count = 0;
  for (const ParamSlot& slot : param_layout_.regions[static_cast<size_t>(unit.region)].params)
    if (slot.offset < unit.end && slot.offset + slot.numel > unit.begin && count++ == 0) tensors = slot.hf_name;
  if (count > 1) tensors += fmt::format(" and {} more tensor(s)", count - 1);
  const int kind = offloads_master(settings_.mode) ? part : part + 1;
  constexpr const char* kKinds[3] = {"fp32 master", "exp_avg", "exp_avg_sq"};
  throw Error(fmt::format("checksum mismatch in the state tier: {} at offset {}, the {} of {} (region {}, elements {} "
                          "to {}) is not what this run wrote there; the device or another program changed it",
                          own_.names[static_cast<size_t>(unit.file)], unit.offset + part * unit.kind_stride * 4,
                          kKinds[kind], tensors, unit.region, unit.begin, unit.end));
}

void StateTier::read_slice(int q, int64_t r, StateKind kind, float* dst) {
  std::lock_guard lock(mutex_);
  Files& f = files_of(q);
  const int part = part_of(kind);
  MT_ASSERT(part >= 0);
  const int64_t begin = HostStore::slice_of(param_layout_.regions[static_cast<size_t>(r)].numel, q, ranks_).begin;
  for (size_t u = 0; u < f.layout.units.size(); ++u) {
    const TierUnit& unit = f.layout.units[u];
    if (unit.region != r) continue;
    TierBatch batch;
    submit(f, unit, part, sync_, false, batch);
    io_->wait(batch);
    if (q == rank_) check_part(u, part, sync_);
    std::memcpy(dst + (unit.begin - begin), sync_, static_cast<size_t>(unit.end - unit.begin) * 4);
  }
}

void StateTier::write_slice(int q, int64_t r, StateKind kind, const float* src) {
  std::lock_guard lock(mutex_);
  Files& f = files_of(q);
  const int part = part_of(kind);
  MT_ASSERT(part >= 0);
  const int64_t begin = HostStore::slice_of(param_layout_.regions[static_cast<size_t>(r)].numel, q, ranks_).begin;
  for (size_t u = 0; u < f.layout.units.size(); ++u) {
    const TierUnit& unit = f.layout.units[u];
    if (unit.region != r) continue;
    const int64_t n = unit.end - unit.begin;
    std::memcpy(sync_, src + (unit.begin - begin), static_cast<size_t>(n) * 4);
    std::memset(sync_ + n, 0, static_cast<size_t>(unit.kind_stride - n) * 4);
    TierBatch batch;
    submit(f, unit, part, sync_, true, batch);
    io_->wait(batch);
    if (q == rank_) record_part(u, part, sync_);
  }
}

void StateTier::start_read(size_t u, int b) {
  std::lock_guard lock(mutex_);
  submit(own_, own_.layout.units[u], -1, buffers_[static_cast<size_t>(b)], false, batches_[static_cast<size_t>(b)]);
  in_flight_[static_cast<size_t>(b)].unit = static_cast<int64_t>(u);
}

void StateTier::start_write(size_t u, int b) {
  std::lock_guard lock(mutex_);
  maybe_fill_device_for_test();
  const float* staged = buffers_[static_cast<size_t>(b)];
  for (int p = 0; p < parts_; ++p) record_part(u, p, staged + p * own_.layout.units[u].kind_stride);
  submit(own_, own_.layout.units[u], -1, buffers_[static_cast<size_t>(b)], true, batches_[static_cast<size_t>(b)]);
  in_flight_[static_cast<size_t>(b)].unit = -1;
}

void StateTier::wait(int b) {
  std::lock_guard lock(mutex_);
  io_->wait(batches_[static_cast<size_t>(b)]);
  InFlight& read = in_flight_[static_cast<size_t>(b)];
  if (read.unit < 0) return;
  const auto u = static_cast<size_t>(read.unit);
  read.unit = -1;
  const float* staged = buffers_[static_cast<size_t>(b)];
  for (int p = 0; p < parts_; ++p) check_part(u, p, staged + p * own_.layout.units[u].kind_stride);
}

// Test hook (not documented for users): after this many unit writes, the device fills up as if another program had
// taken its space — this rank's files lose their blocks (punched) and a filler file takes every free byte — so the
// next write meets the file system's real "no space left" error.
void StateTier::maybe_fill_device_for_test() {
  if (fill_after_writes_ < 0 || writes_++ != fill_after_writes_) return;
  // The punched blocks read as zeros: what this run wrote there is forgotten, so that the write's ENOSPC is what the
  // hook shows, not the checksum of a unit the simulation itself emptied.
  std::fill(part_known_.begin(), part_known_.end(), 0);
  for (size_t f = 0; f < own_.fds.size(); ++f) {
    fallocate(own_.fds[f], FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, own_.layout.file_bytes[f]);
    const std::string filler = own_.names[f] + ".filler";
    const int fd = open(filler.c_str(), O_CREAT | O_WRONLY, 0600);
    struct statvfs vfs {};
    int64_t chunk = fd >= 0 && statvfs(filler.c_str(), &vfs) == 0
                        ? static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize) : 0;
    for (int64_t at = 0; chunk >= 4096;) {  // every last block: what does not fit is tried in halves
      if (fallocate(fd, 0, at, chunk) == 0)
        at += chunk;
      else
        chunk /= 2;
    }
    if (fd >= 0) close(fd);
  }
}

}  // namespace mt
