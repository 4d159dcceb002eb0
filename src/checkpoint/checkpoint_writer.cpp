// Collective HDF5 checkpoint writer (see checkpoint_writer.h).
#include "checkpoint/checkpoint_writer.h"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>
#include <vector>

#include "checkpoint/h5_handle.h"
#include "checkpoint/tensor_selection.h"
#include "core/error.h"
#include "core/log.h"
#include "dist/check.h"
#include "dist/context.h"

namespace mt {
namespace {

std::string broadcast_string(std::string s) {
  const MPI_Comm world = dist::context().world;
  int64_t n = static_cast<int64_t>(s.size());
  MT_CHECK_MPI(MPI_Bcast(&n, 1, MPI_INT64_T, 0, world));
  s.resize(static_cast<size_t>(n));
  MT_CHECK_MPI(MPI_Bcast(s.data(), static_cast<int>(n), MPI_CHAR, 0, world));
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
  h5::Handle space(h5::check(H5Screate(H5S_SCALAR), file, "/meta dataspace"));
  h5::Handle attr(h5::check(H5Acreate2(group, name, H5T_NATIVE_INT64, space.get(), H5P_DEFAULT, H5P_DEFAULT), file,
                            std::string("/meta ") + name));
  h5::check(H5Awrite(attr.get(), H5T_NATIVE_INT64, &value), file, std::string("/meta ") + name);
}

void write_string_attribute(hid_t group, const char* name, const std::string& value, const std::string& file) {
  h5::Handle type(h5::check(H5Tcopy(H5T_C_S1), file, "string type"));
  h5::check(H5Tset_size(type.get(), std::max<size_t>(value.size(), 1)), file, "string type");
  h5::check(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), file, "string type");
  h5::Handle space(h5::check(H5Screate(H5S_SCALAR), file, "/meta dataspace"));
  h5::Handle attr(h5::check(H5Acreate2(group, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), file,
                            std::string("/meta ") + name));
  std::string padded = value;
  padded.resize(std::max<size_t>(value.size(), 1), '\0');
  h5::check(H5Awrite(attr.get(), type.get(), padded.data()), file, std::string("/meta ") + name);
}

void write_meta(hid_t file_id, const CheckpointMeta& m, const std::string& file) {
  h5::Handle g(h5::check(H5Gcreate2(file_id, "/meta", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), file, "/meta"));
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

// Every rank creates every dataset (collective); each writes the part of it inside its own slice.
int64_t write_kind(hid_t file_id, const char* group_name, HostStore& store, float* (HostStore::*data)(int64_t),
                   hid_t dcpl, const std::string& file) {
  h5::Handle lcpl(h5::check(H5Pcreate(H5P_LINK_CREATE), file, "link property list"));
  h5::check(H5Pset_create_intermediate_group(lcpl.get(), 1), file, "link property list");
  int64_t bytes = 0;
  for (int64_t r = 0; r < store.num_regions(); ++r) {
    const HostStore::Slice s = store.slice(r);
    for (const ParamSlot& slot : store.layout().regions[static_cast<size_t>(r)].params) {
      const std::string name = std::string(group_name) + "/" + slot.hf_name;
      const std::vector<hsize_t> dims(slot.shape.begin(), slot.shape.end());
      h5::Handle space(h5::check(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), file, name));
      h5::Handle ds(h5::check(H5Dcreate2(file_id, name.c_str(), H5T_IEEE_F32LE, space.get(), lcpl.get(), dcpl,
                                         H5P_DEFAULT), file, name));
      bytes += slot.numel * 4;
      const int64_t begin = std::max(slot.offset, s.begin), end = std::min(slot.offset + slot.numel, s.end);
      if (begin >= end) continue;
      select_flat_range(space.get(), slot.shape, begin - slot.offset, end - slot.offset, file, name);
      const hsize_t count = static_cast<hsize_t>(end - begin);
      h5::Handle mem(h5::check(H5Screate_simple(1, &count, nullptr), file, name));
      h5::check(H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, mem.get(), space.get(), H5P_DEFAULT, (store.*data)(r) + begin),
                file, name);
    }
  }
  return bytes;
}

}  // namespace

SaveReport save_checkpoint(const std::filesystem::path& path, HostStore& store, const CheckpointMeta& meta) {
  const auto t0 = std::chrono::steady_clock::now();
  const dist::Context& ctx = dist::context();
  h5::quiet_errors();
  CheckpointMeta m = meta_from_json(nlohmann::json::parse(broadcast_string(ctx.is_root() ? to_json(meta).dump() : "")));
  m.versions = library_versions();
  const std::filesystem::path final_path = broadcast_string(ctx.is_root() ? path.string() : "");
  const std::filesystem::path tmp = final_path.string() + ".tmp";
  const std::string file = tmp.string();
  if (ctx.is_root()) std::filesystem::create_directories(final_path.parent_path());
  MT_CHECK_MPI(MPI_Barrier(ctx.world));

  SaveReport report;
  {
    h5::Handle fapl(h5::check(H5Pcreate(H5P_FILE_ACCESS), file, "file access list"));
    h5::check(H5Pset_fapl_mpio(fapl.get(), ctx.world, MPI_INFO_NULL), file, "H5Pset_fapl_mpio");
    h5::check(H5Pset_all_coll_metadata_ops(fapl.get(), true), file, "collective metadata");
    h5::check(H5Pset_coll_metadata_write(fapl.get(), true), file, "collective metadata");
    h5::Handle f(h5::check(H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), file, "create"));
    h5::Handle dcpl(h5::check(H5Pcreate(H5P_DATASET_CREATE), file, "dataset creation list"));
    h5::check(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), file, "dataset creation list");
    write_meta(f.get(), m, file);
    report.bytes += write_kind(f.get(), "/params", store, &HostStore::master, dcpl.get(), file);
    report.bytes += write_kind(f.get(), "/optim/exp_avg", store, &HostStore::exp_avg, dcpl.get(), file);
    report.bytes += write_kind(f.get(), "/optim/exp_avg_sq", store, &HostStore::exp_avg_sq, dcpl.get(), file);
    h5::check(H5Fflush(f.get(), H5F_SCOPE_GLOBAL), file, "flush");
  }  // closed by every rank (collective)
  MT_CHECK_MPI(MPI_Barrier(ctx.world));
  if (ctx.is_root()) {
    // Test hook (not documented for users): rank 0 dies between writing the .tmp and renaming it.
    const char* kill_at = std::getenv("MEGATRAIN_TEST_KILL_IN_SAVE");
    if (kill_at && *kill_at && std::atoll(kill_at) == m.step) std::raise(SIGKILL);
    std::filesystem::rename(tmp, final_path);
  }
  MT_CHECK_MPI(MPI_Barrier(ctx.world));
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
