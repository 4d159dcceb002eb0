// Collective HDF5 checkpoint writer (see checkpoint_writer.h).
#include "checkpoint/checkpoint_writer.h"

#include <fmt/format.h>
#include <mpi.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <utility>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "checkpoint/h5_handle.h"
#include "core/tensor_checksum.h"
#include "checkpoint/tensor_selection.h"
#include "core/error.h"
#include "core/fault_hooks.h"
#include "core/log.h"
#include "core/os_error.h"
#include "core/stop_signal.h"
#include "dist/check.h"
#include "dist/context.h"
#include "store/shared_memory_check.h"

namespace mt {
namespace {

std::string broadcast_string(std::string s) {
  const MPI_Comm node = dist::context().node;
  int64_t n = static_cast<int64_t>(s.size());
  MT_CHECK_MPI(MPI_Bcast(&n, 1, MPI_INT64_T, 0, node));
  s.resize(static_cast<size_t>(n));
  MT_CHECK_MPI(MPI_Bcast(s.data(), static_cast<int>(n), MPI_CHAR, 0, node));
  return s;
}

std::string library_versions() {
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(mpi, &len);
  std::string mpi_line(mpi, static_cast<size_t>(len));
  mpi_line = mpi_line.substr(0, mpi_line.find_first_of(",\n"));
  return fmt::format("megatrain {}, HDF5 {}.{}.{}, {}", MEGATRAIN_VERSION, major, minor, release, mpi_line);
}

void write_int_attribute(hid_t group, const char* name, int64_t value, const std::string& file) {
  h5::Handle space(h5::check_write(H5Screate(H5S_SCALAR), file, "/meta dataspace"));
  h5::Handle attr(h5::check_write(H5Acreate2(group, name, H5T_NATIVE_INT64, space.get(), H5P_DEFAULT, H5P_DEFAULT), file,
                            std::string("/meta ") + name));
  h5::check_write(H5Awrite(attr.get(), H5T_NATIVE_INT64, &value), file, std::string("/meta ") + name);
}

void write_string_attribute(hid_t group, const char* name, const std::string& value, const std::string& file) {
  h5::Handle type(h5::check_write(H5Tcopy(H5T_C_S1), file, "string type"));
  h5::check_write(H5Tset_size(type.get(), std::max<size_t>(value.size(), 1)), file, "string type");
  h5::check_write(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), file, "string type");
  h5::Handle space(h5::check_write(H5Screate(H5S_SCALAR), file, "/meta dataspace"));
  h5::Handle attr(h5::check_write(H5Acreate2(group, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), file,
                            std::string("/meta ") + name));
  std::string padded = value;
  padded.resize(std::max<size_t>(value.size(), 1), '\0');
  h5::check_write(H5Awrite(attr.get(), type.get(), padded.data()), file, std::string("/meta ") + name);
}

void write_meta(hid_t file_id, const CheckpointMeta& m, const std::string& file) {
  h5::Handle g(h5::check_write(H5Gcreate2(file_id, "/meta", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), file, "/meta"));
  const hid_t id = g.get();
  write_int_attribute(id, "format_version", m.format_version, file);
  write_int_attribute(id, "step", m.step, file);
  write_int_attribute(id, "tokens_seen", m.tokens_seen, file);
  write_int_attribute(id, "updates_applied", m.updates_applied, file);
  write_int_attribute(id, "data_epoch", m.data_epoch, file);
  write_int_attribute(id, "data_index", m.data_index, file);
  write_int_attribute(id, "seed", m.seed, file);
  write_int_attribute(id, "shuffle", m.shuffle, file);
  write_string_attribute(id, "model_name", m.model_name, file);
  write_string_attribute(id, "config_yaml", m.config_yaml, file);
  write_string_attribute(id, "model_config_json", m.model_config_json, file);
  write_string_attribute(id, "versions", m.versions, file);
}

// How far this rank's writes are, for the message of a failed one (a full disk).
struct WriteProgress {
  int64_t written = 0;     // this rank's tensor bytes written so far
  int64_t mine = 0;        // this rank's tensor bytes in the file
  int64_t file_bytes = 0;  // every rank's
};

WriteProgress planned_writes(const CheckpointSource& source) {
  WriteProgress p;
  for (size_t r = 0; r < source.regions.size(); ++r) {
    p.mine += 3 * 4 * source.regions[r].slice.size();
    p.file_bytes += 3 * 4 * source.layout->regions[r].numel;
  }
  return p;
}

// Free bytes for an unprivileged writer on the file system of `dir`; -1 when unknown.
int64_t free_bytes(const std::filesystem::path& dir) {
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) != 0) return -1;
  return static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
}

// Every dataset of the file in creation order, with this rank's part of its checksum (tensor_checksum.h).
struct DatasetChecksums {
  std::vector<std::string> names;
  std::vector<uint64_t> sums;
};

// Every rank creates every dataset (collective); each writes the part of it inside its own slice and adds that
// part's checksum.
int64_t write_kind(hid_t file_id, const char* group_name, const CheckpointSource& source,
                   const float* CheckpointSource::Region::*data, StateKind kind, hid_t dcpl,
                   const std::string& file, WriteProgress& progress, DatasetChecksums& checksums) {
  h5::Handle lcpl(h5::check_write(H5Pcreate(H5P_LINK_CREATE), file, "link property list"));
  h5::check_write(H5Pset_create_intermediate_group(lcpl.get(), 1), file, "link property list");
  int64_t bytes = 0;
  for (size_t r = 0; r < source.regions.size(); ++r) {
    const CheckpointSource::Region& region = source.regions[r];
    const HostStore::Slice s = region.slice;
    const float* values = region.*data;
    if (!values && s.size() > 0) values = source.fetch(r, kind);
    for (const ParamSlot& slot : source.layout->regions[r].params) {
      const std::string name = std::string(group_name) + "/" + slot.hf_name;
      const std::vector<hsize_t> dims(slot.shape.begin(), slot.shape.end());
      h5::Handle space(h5::check_write(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), file, name));
      h5::Handle ds(h5::check_write(H5Dcreate2(file_id, name.c_str(), H5T_IEEE_F32LE, space.get(), lcpl.get(), dcpl,
                                         H5P_DEFAULT), file, name));
      bytes += slot.numel * 4;
      const int64_t begin = std::max(slot.offset, s.begin), end = std::min(slot.offset + slot.numel, s.end);
      checksums.names.push_back(name);
      checksums.sums.push_back(begin < end ? tensor_checksum(values + (begin - s.begin), begin - slot.offset, end - begin)
                                           : 0);
      if (begin >= end) continue;
      select_flat_range(space.get(), slot.shape, begin - slot.offset, end - slot.offset, file, name);
      const hsize_t count = static_cast<hsize_t>(end - begin);
      h5::Handle mem(h5::check_write(H5Screate_simple(1, &count, nullptr), file, name));
      h5::check_write(H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, mem.get(), space.get(), H5P_DEFAULT,
                               values + (begin - s.begin)),
                      file, fmt::format("writing {} after {} of this rank's {} bytes (the file needs {})", name,
                                        progress.written, progress.mine, progress.file_bytes));
      progress.written += static_cast<int64_t>(count) * 4;
    }
  }
  return bytes;
}

// /model_files/<name> (uint8): every rank creates each dataset (the names and sizes from rank 0), rank 0 alone
// writes the bytes (independent I/O).
void write_model_files(hid_t file_id, const std::map<std::string, std::string>& root_files, const std::string& file) {
  nlohmann::json sizes = nlohmann::json::object();
  for (const auto& [name, bytes] : root_files) sizes[name] = bytes.size();
  sizes = nlohmann::json::parse(broadcast_string(dist::context().is_root() ? sizes.dump() : ""));
  if (sizes.empty()) return;
  h5::Handle g(h5::check_write(H5Gcreate2(file_id, "/model_files", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), file,
                               "/model_files"));
  for (const auto& [name, size] : sizes.items()) {
    const std::string what = "/model_files/" + name;
    const hsize_t n = size.get<hsize_t>();
    h5::Handle space(h5::check_write(H5Screate_simple(1, &n, nullptr), file, what));
    h5::Handle ds(h5::check_write(H5Dcreate2(g.get(), name.c_str(), H5T_STD_U8LE, space.get(), H5P_DEFAULT,
                                             H5P_DEFAULT, H5P_DEFAULT), file, what));
    if (dist::context().is_root() && n > 0)
      h5::check_write(H5Dwrite(ds.get(), H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, root_files.at(name).data()),
                      file, what);
  }
}

// The ranks' parts summed; every rank writes the same attributes (collective metadata).
void write_checksums(hid_t file_id, DatasetChecksums& checksums, const std::string& file) {
  MT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, checksums.sums.data(), static_cast<int>(checksums.sums.size()),
                             MPI_UINT64_T, MPI_SUM, dist::context().node));
  h5::Handle space(h5::check_write(H5Screate(H5S_SCALAR), file, "checksum dataspace"));
  for (size_t i = 0; i < checksums.names.size(); ++i) {
    const std::string what = checksums.names[i] + " checksum";
    h5::Handle ds(h5::check_write(H5Dopen2(file_id, checksums.names[i].c_str(), H5P_DEFAULT), file, what));
    h5::Handle attr(h5::check_write(H5Acreate2(ds.get(), kChecksumAttribute, H5T_STD_U64LE, space.get(), H5P_DEFAULT,
                                               H5P_DEFAULT), file, what));
    h5::check_write(H5Awrite(attr.get(), H5T_NATIVE_UINT64, &checksums.sums[i]), file, what);
  }
}

}  // namespace

CheckpointSource store_source(HostStore& store) {
  CheckpointSource source;
  source.layout = &store.layout();
  for (int64_t r = 0; r < store.num_regions(); ++r) {
    const HostStore::Slice s = store.slice(r);
    auto at = [&](StateKind k) -> const float* { return store.in_ram(k) ? store.state(r, k) + s.begin : nullptr; };
    source.regions.push_back({s, at(StateKind::master), at(StateKind::exp_avg), at(StateKind::exp_avg_sq)});
  }
  if (store.tier()) {
    auto staging = std::make_shared<std::vector<float>>();
    source.fetch = [&store, staging](size_t r, StateKind k) {
      staging->resize(static_cast<size_t>(store.slice(static_cast<int64_t>(r)).size()));
      return store.slice_state(static_cast<int64_t>(r), k, staging->data());
    };
  }
  return source;
}

CheckpointSnapshot::CheckpointSnapshot(HostStore& store) {
  const CheckpointSource live = store_source(store);
  source_.layout = live.layout;
  for (const CheckpointSource::Region& region : live.regions) elements_ += 3 * static_cast<size_t>(region.slice.size());
  // Anonymous memory in transparent huge pages where the kernel allows (madvise): first-touching it page by
  // page costs more than the copy itself. The copy's threads first-touch it.
  const size_t bytes = std::max<size_t>(elements_, 1) * sizeof(float);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  MT_REQUIRE(p != MAP_FAILED, "checkpoint snapshot: cannot map {} bytes", bytes);
  madvise(p, bytes, MADV_HUGEPAGE);  // advice only
  data_ = std::unique_ptr<float, Unmap>(static_cast<float*>(p), Unmap{bytes});
  std::vector<std::pair<const float*, float*>> copies;     // (from, to) of each region's three kinds in RAM
  std::vector<int64_t> lengths;
  float* at = data_.get();
  for (size_t r = 0; r < live.regions.size(); ++r) {
    const CheckpointSource::Region& region = live.regions[r];
    const int64_t n = region.slice.size();
    CheckpointSource::Region mine{region.slice, at, at + n, at + 2 * n};
    for (auto [from, to, kind] : {std::tuple{region.master, at, StateKind::master},
                                  std::tuple{region.exp_avg, at + n, StateKind::exp_avg},
                                  std::tuple{region.exp_avg_sq, at + 2 * n, StateKind::exp_avg_sq}}) {
      if (!from && n > 0) {  // on the state tier: read straight into the snapshot
        store.tier()->read_slice(store.rank(), static_cast<int64_t>(r), kind, to);
        continue;
      }
      copies.emplace_back(from, to);
      lengths.push_back(n);
    }
    source_.regions.push_back(mine);
    at += 3 * n;
  }
  // Chunks of 1 Mi elements over every (region, kind), spread over the threads.
  constexpr int64_t kChunk = int64_t{1} << 20;
  std::vector<std::pair<size_t, int64_t>> chunks;  // (copy, first element)
  for (size_t i = 0; i < copies.size(); ++i)
    for (int64_t e = 0; e < lengths[i]; e += kChunk) chunks.emplace_back(i, e);
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t c = 0; c < static_cast<int64_t>(chunks.size()); ++c) {
    const auto [i, e] = chunks[static_cast<size_t>(c)];
    const int64_t n = std::min(kChunk, lengths[i] - e);
    std::memcpy(copies[i].second + e, copies[i].first + e, static_cast<size_t>(n) * sizeof(float));
  }
}

void CheckpointSnapshot::Unmap::operator()(float* p) const { munmap(p, bytes); }

SaveReport save_checkpoint(const std::filesystem::path& path, const CheckpointSource& source,
                           const CheckpointMeta& meta, int64_t keep) {
  const auto t0 = std::chrono::steady_clock::now();
  const dist::Context& ctx = dist::context();
  h5::quiet_errors();
  CheckpointMeta m = meta_from_json(nlohmann::json::parse(broadcast_string(ctx.is_root() ? to_json(meta).dump() : "")));
  m.versions = library_versions();
  const std::filesystem::path final_path = broadcast_string(ctx.is_root() ? path.string() : "");
  const std::filesystem::path tmp = final_path.string() + ".tmp";
  const std::string file = tmp.string();
  if (ctx.is_root()) std::filesystem::create_directories(final_path.parent_path());
  MT_CHECK_MPI(MPI_Barrier(ctx.node));

  SaveReport report;
  WriteProgress progress = planned_writes(source);
  stop_signal::partial_file_begin(file.c_str());  // a second stop signal removes it (core/stop_signal.h)
  h5::Handle f;  // outside the try: a failed save closes it only after emptying the file
  try {
    h5::Handle fapl(h5::check_write(H5Pcreate(H5P_FILE_ACCESS), file, "file access list"));
    h5::check_write(H5Pset_fapl_mpio(fapl.get(), ctx.node, MPI_INFO_NULL), file, "H5Pset_fapl_mpio");
    h5::check_write(H5Pset_all_coll_metadata_ops(fapl.get(), true), file, "collective metadata");
    h5::check_write(H5Pset_coll_metadata_write(fapl.get(), true), file, "collective metadata");
    f = h5::Handle(h5::check_write(H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), file, "create"));
    h5::Handle dcpl(h5::check_write(H5Pcreate(H5P_DATASET_CREATE), file, "dataset creation list"));
    h5::check_write(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), file, "dataset creation list");
    write_meta(f.get(), m, file);
    write_model_files(f.get(), meta.model_files, file);
    using Region = CheckpointSource::Region;
    DatasetChecksums checksums;
    report.bytes += write_kind(f.get(), "/params", source, &Region::master, StateKind::master, dcpl.get(), file,
                               progress, checksums);
    report.bytes += write_kind(f.get(), "/optim/exp_avg", source, &Region::exp_avg, StateKind::exp_avg, dcpl.get(),
                               file, progress, checksums);
    report.bytes += write_kind(f.get(), "/optim/exp_avg_sq", source, &Region::exp_avg_sq, StateKind::exp_avg_sq,
                               dcpl.get(), file, progress, checksums);
    write_checksums(f.get(), checksums, file);
    h5::check_write(H5Fflush(f.get(), H5F_SCOPE_GLOBAL), file, "flush");
    dcpl.reset();
    fapl.reset();
    h5::check_write(H5Fclose(f.release()), file, "close");  // collective; it writes the file's metadata
  } catch (const Error& e) {
    // The free space while the partial file still holds its bytes tells a full disk from another failure.
    const std::filesystem::path dir = final_path.parent_path();
    const int64_t free = free_bytes(dir), remaining = progress.mine - progress.written;
    const std::string room = free < 0 ? std::string("free space unknown")
                                      : fmt::format("{} free on {}", format_bytes(static_cast<uint64_t>(free)), dir.string());
    // The file is still open: emptied first, its close can write the metadata it holds even on a full disk
    // (otherwise the close fails, and HDF5 crashes closing it again at exit).
    const int emptied = ::truncate(file.c_str(), 0);
    (void)emptied;  // the removal below is what matters
    f.reset();
    H5Eclear2(H5E_DEFAULT);
    // The partial file goes (any rank may remove it); the earlier checkpoints were never touched.
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    stop_signal::partial_file_end();
    // The cause first (a full disk, told from the free space; else HDF5's account of the failed call), then what
    // it means for the checkpoints.
    const std::string outcome = fmt::format("checkpoint {} not written: the partial file is removed and the earlier "
                                            "checkpoints are intact", final_path.string());
    if (free >= 0 && free < remaining)
      throw Error(fmt::format("{}: {} ({}, {} bytes still to write); {}", os_error_first(ENOSPC), outcome, room,
                              remaining, e.what()));
    throw Error(fmt::format("{}; {} ({})", e.what(), outcome, room));
  }
  MT_CHECK_MPI(MPI_Barrier(ctx.node));
  if (ctx.is_root()) {
    // Test hooks (core/fault_hooks.h): rank 0 dies between writing the .tmp and renaming it, or waits this many
    // seconds with the complete .tmp before renaming.
    if (fault_hooks().kill_in_save_step == m.step) std::raise(SIGKILL);
    if (const double slow = fault_hooks().slow_rename_seconds; slow > 0)
      std::this_thread::sleep_for(std::chrono::duration<double>(slow));
    std::filesystem::rename(tmp, final_path);
    prune_checkpoints(final_path.parent_path(), keep);
  }
  stop_signal::partial_file_end();
  MT_CHECK_MPI(MPI_Barrier(ctx.node));
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

void prune_checkpoints(const std::filesystem::path& dir, int64_t keep) {
  if (keep <= 0) return;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.starts_with("step-") && n.ends_with(".h5")) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());  // zero-padded steps: name order is step order
  for (size_t i = 0; i + static_cast<size_t>(keep) < files.size(); ++i) {
    std::filesystem::remove(files[i]);
    log::info("removed old checkpoint {} (save_total_limit {})", files[i].string(), keep);
  }
}

}  // namespace mt
