// Serial HDF5 checkpoint reader (see checkpoint_reader.h).
#include "checkpoint/checkpoint_reader.h"

#include <algorithm>
#include <cstring>
#include <fstream>

#include "core/tensor_checksum.h"
#include "core/error.h"
#include "core/log.h"
#include "io/safetensors.h"

namespace mt {
namespace {

int64_t read_int(hid_t group, const char* name, const std::string& file) {
  h5::Handle attr(h5::check(H5Aopen(group, name, H5P_DEFAULT), file, std::string("/meta attribute ") + name));
  int64_t v = 0;
  h5::check(H5Aread(attr.get(), H5T_NATIVE_INT64, &v), file, std::string("/meta attribute ") + name);
  return v;
}

std::string read_string(hid_t group, const char* name, const std::string& file) {
  const std::string what = std::string("/meta attribute ") + name;
  h5::Handle attr(h5::check(H5Aopen(group, name, H5P_DEFAULT), file, what));
  h5::Handle type(h5::check(H5Aget_type(attr.get()), file, what));
  MT_REQUIRE(H5Tget_class(type.get()) == H5T_STRING && !H5Tis_variable_str(type.get()),
             "{}: {} is not a fixed-length string", file, what);
  std::string s(H5Tget_size(type.get()), '\0');
  h5::check(H5Aread(attr.get(), type.get(), s.data()), file, what);
  s.resize(std::strlen(s.c_str()));
  return s;
}

bool looks_like_hdf5(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  char sig[8] = {};
  in.read(sig, 8);
  return in.gcount() == 8 && std::memcmp(sig, "\x89HDF\r\n\x1a\n", 8) == 0;
}

}  // namespace

CheckpointFile::CheckpointFile(const std::filesystem::path& path) : path_(path) {
  const std::string file = path.string();
  h5::quiet_errors();
  MT_REQUIRE(std::filesystem::is_regular_file(path), "{}: no such checkpoint file", file);
  MT_REQUIRE(looks_like_hdf5(path), "{}: not an HDF5 file (no HDF5 signature), so not a megatrain checkpoint", file);
  file_ = h5::Handle(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  MT_REQUIRE(file_.get() >= 0, "{}: HDF5 cannot open it (truncated or corrupt file?)", file);
  MT_REQUIRE(H5Lexists(file_.get(), "meta", H5P_DEFAULT) > 0 && H5Lexists(file_.get(), "params", H5P_DEFAULT) > 0,
             "{}: an HDF5 file without /meta and /params: not a megatrain checkpoint", file);
  h5::Handle g(h5::check(H5Gopen2(file_.get(), "/meta", H5P_DEFAULT), file, "/meta"));
  const hid_t id = g.get();
  meta_.format_version = read_int(id, "format_version", file);
  MT_REQUIRE(meta_.format_version == kCheckpointFormatVersion,
             "{}: checkpoint format version {}; this build reads version {}", file, meta_.format_version,
             kCheckpointFormatVersion);
  meta_.step = read_int(id, "step", file);
  meta_.tokens_seen = read_int(id, "tokens_seen", file);
  meta_.updates_applied = read_int(id, "updates_applied", file);
  meta_.data_epoch = read_int(id, "data_epoch", file);
  meta_.data_index = read_int(id, "data_index", file);
  meta_.seed = read_int(id, "seed", file);
  meta_.shuffle = read_int(id, "shuffle", file);
  meta_.model_name = read_string(id, "model_name", file);
  meta_.config_yaml = read_string(id, "config_yaml", file);
  meta_.model_config_json = read_string(id, "model_config_json", file);
  meta_.versions = read_string(id, "versions", file);
}

std::vector<std::string> CheckpointFile::tensor_names(const std::string& group) const {
  const std::string file = path_.string();
  h5::Handle g(h5::check(H5Gopen2(file_.get(), group.c_str(), H5P_DEFAULT), file, "/" + group));
  H5G_info_t info;
  h5::check(H5Gget_info(g.get(), &info), file, "/" + group);
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t n = H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    h5::check(static_cast<hid_t>(n), file, "/" + group + " link name");
    std::string name(static_cast<size_t>(n) + 1, '\0');
    H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(), H5P_DEFAULT);
    name.resize(static_cast<size_t>(n));
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::map<std::string, std::string> CheckpointFile::model_files() const {
  std::map<std::string, std::string> files;
  if (H5Lexists(file_.get(), "model_files", H5P_DEFAULT) <= 0) return files;
  const std::string file = path_.string();
  for (const std::string& name : tensor_names("model_files")) {
    const std::string what = "/model_files/" + name;
    h5::Handle ds(h5::check(H5Dopen2(file_.get(), what.c_str(), H5P_DEFAULT), file, what));
    h5::Handle space(h5::check(H5Dget_space(ds.get()), file, what));
    const hssize_t n = H5Sget_simple_extent_npoints(space.get());
    h5::check(static_cast<hid_t>(n), file, what);
    std::string bytes(static_cast<size_t>(n), '\0');
    if (n > 0)
      h5::check(H5Dread(ds.get(), H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()), file,
                what + " read (truncated or corrupt file?)");
    files[name] = std::move(bytes);
  }
  return files;
}

std::vector<int64_t> CheckpointFile::shape(const std::string& group, const std::string& name) const {
  const std::string file = path_.string(), full = "/" + group + "/" + name;
  MT_REQUIRE(H5Lexists(file_.get(), full.c_str(), H5P_DEFAULT) > 0, "{}: no tensor {}", file, full);
  h5::Handle ds(h5::check(H5Dopen2(file_.get(), full.c_str(), H5P_DEFAULT), file, full));
  h5::Handle space(h5::check(H5Dget_space(ds.get()), file, full));
  const int rank = H5Sget_simple_extent_ndims(space.get());
  h5::check(rank, file, full + " dataspace");
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return {dims.begin(), dims.end()};
}

std::string CheckpointFile::dtype(const std::string& group, const std::string& name) const {
  const std::string file = path_.string(), full = "/" + group + "/" + name;
  h5::Handle ds(h5::check(H5Dopen2(file_.get(), full.c_str(), H5P_DEFAULT), file, full));
  h5::Handle type(h5::check(H5Dget_type(ds.get()), file, full));
  const size_t size = H5Tget_size(type.get());
  switch (H5Tget_class(type.get())) {
    case H5T_FLOAT: return "float" + std::to_string(size * 8);
    case H5T_INTEGER: return "int" + std::to_string(size * 8);
    default: return "other";
  }
}

std::vector<float> CheckpointFile::read(const std::string& group, const std::string& name,
                                        const std::vector<int64_t>& expected) const {
  const std::vector<int64_t> s = expected.empty() ? shape(group, name) : expected;
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  std::vector<float> out(static_cast<size_t>(n));
  read_into(group, name, s, out.data());
  return out;
}

void CheckpointFile::read_into(const std::string& group, const std::string& name,
                               const std::vector<int64_t>& expected, float* dst) const {
  const std::string file = path_.string(), full = "/" + group + "/" + name;
  const std::vector<int64_t> s = shape(group, name);
  MT_REQUIRE(s == expected, "{}: {} has shape {}, the model has {} (a checkpoint of another model?)", file, full,
             shape_text(s), shape_text(expected));
  h5::Handle ds(h5::check(H5Dopen2(file_.get(), full.c_str(), H5P_DEFAULT), file, full));
  h5::check(H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, dst), file,
            full + " read (truncated or corrupt file?)");
  int64_t numel = 1;
  for (int64_t d : s) numel *= d;
  const int64_t bad = first_non_finite(dst, numel);
  MT_REQUIRE(bad < 0, "non-finite value ({}) in checkpoint {}: tensor {}, element {}; the run that saved it diverged "
             "or the file was altered, so it is refused", dst[bad], file, full, bad);
  if (H5Aexists(ds.get(), kChecksumAttribute) <= 0) return;  // written before checksums
  h5::Handle attr(h5::check(H5Aopen(ds.get(), kChecksumAttribute, H5P_DEFAULT), file, full + " checksum"));
  uint64_t stored = 0;
  h5::check(H5Aread(attr.get(), H5T_NATIVE_UINT64, &stored), file, full + " checksum");
  const uint64_t computed = tensor_checksum(dst, 0, numel);
  MT_REQUIRE(stored == computed, "checksum mismatch in checkpoint {}: tensor {} (stored {:016x}, computed {:016x}); "
             "the file is corrupt, so it is refused", file, full, stored, computed);
}

void restore_store(const CheckpointFile& checkpoint, HostStore& store) {
  const std::string file = checkpoint.path().string();
  // Kinds in RAM straight into the store; kinds on the state tier through one region-sized buffer each.
  const int64_t largest = store.layout().largest_region_numel;
  std::vector<float> staged[3];
  for (StateKind k : {StateKind::master, StateKind::exp_avg, StateKind::exp_avg_sq})
    if (!store.in_ram(k)) staged[static_cast<int>(k)].resize(static_cast<size_t>(largest));
  constexpr const char* kGroups[3] = {"params", "optim/exp_avg", "optim/exp_avg_sq"};
  for (int64_t r = 0; r < store.num_regions(); ++r) {
    for (StateKind k : {StateKind::master, StateKind::exp_avg, StateKind::exp_avg_sq}) {
      std::vector<float>& buffer = staged[static_cast<int>(k)];
      float* dst = buffer.empty() ? store.state(r, k) : buffer.data();
      for (const ParamSlot& slot : store.layout().regions[static_cast<size_t>(r)].params)
        checkpoint.read_into(kGroups[static_cast<int>(k)], slot.hf_name, slot.shape, dst + slot.offset);
      if (!buffer.empty()) store.write_region_state(r, k, dst);
    }
    const std::vector<float>& master = staged[static_cast<int>(StateKind::master)];
    store.refresh_stream_copy(r, master.empty() ? store.master(r) : master.data());
  }
  size_t slots = 0;
  for (const Region& region : store.layout().regions) slots += region.params.size();
  const size_t present = checkpoint.tensor_names("params").size();
  MT_REQUIRE(present == slots, "{}: holds {} parameter tensors, the model has {} (a checkpoint of another model?)",
             file, present, slots);
}

std::optional<std::filesystem::path> find_latest_checkpoint(const std::filesystem::path& dir) {
  if (!std::filesystem::is_directory(dir)) return std::nullopt;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.starts_with("step-") && n.ends_with(".h5")) files.push_back(e.path());
  }
  std::sort(files.rbegin(), files.rend());
  for (const auto& f : files) {
    try {
      CheckpointFile probe(f);
      return f;
    } catch (const Error& e) {
      log::warn("skipping checkpoint {}: {}", f.string(), e.what());
    }
  }
  return std::nullopt;
}

}  // namespace mt
