// safetensors reading (mmap, validated header) and atomic writing (temporary name, fsync, rename).
// Invariant: every StTensor handed out lies inside its mapping with nbytes == numel × element size;
// the destination of a write holds either the complete new file or whatever was there before.
#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "core/error.h"
#include "core/os_error.h"
#include "core/json_depth.h"
#include "core/regular_file.h"

namespace mt {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors is little-endian; so must the host be");

namespace fs = std::filesystem;

struct StDTypeInfo {
  const char* name;
  StDType dtype;
  std::size_t size;
};
constexpr StDTypeInfo kDTypes[] = {
    {"F32", StDType::F32, 4}, {"F64", StDType::F64, 8}, {"BF16", StDType::BF16, 2}, {"F16", StDType::F16, 2},
    {"I32", StDType::I32, 4}, {"I64", StDType::I64, 8}, {"U8", StDType::U8, 1}, {"F8_E4M3", StDType::F8_E4M3, 1},
};

const StDTypeInfo& dtype_info(StDType t) {
  for (const auto& d : kDTypes)
    if (d.dtype == t) return d;
  MT_ASSERT(false, "unknown StDType");
  return kDTypes[0];
}

std::string errno_text() { return std::strerror(errno); }

float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa × 2^-24
    const float f = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -f : f;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));  // inf / NaN
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

// Parses one entry of the header into t (data pointer relative to `data`, validated against data_size).
StTensor parse_entry(const std::string& name, const nlohmann::json& entry, const fs::path& path, const std::byte* data,
                     std::size_t data_size) {
  MT_REQUIRE(entry.is_object(), "safetensors file {}: header entry '{}' is not an object", path.string(), name);
  StTensor t;
  t.name = name;
  t.file = path;

  const auto dt = entry.find("dtype");
  MT_REQUIRE(dt != entry.end() && dt->is_string(), "safetensors file {}: tensor '{}' has no dtype", path.string(),
             name);
  const auto info = std::find_if(std::begin(kDTypes), std::end(kDTypes),
                                 [&](const StDTypeInfo& d) { return d.name == dt->get<std::string>(); });
  MT_REQUIRE(info != std::end(kDTypes),
             "safetensors file {}: tensor '{}' has unsupported dtype {} (F32, F64, BF16, F16, I32, I64, U8, F8_E4M3)", path.string(),
             name, dt->get<std::string>());
  t.dtype = info->dtype;

  const auto shape = entry.find("shape");
  MT_REQUIRE(shape != entry.end() && shape->is_array(), "safetensors file {}: tensor '{}' has no shape", path.string(),
             name);
  std::uint64_t numel = 1;
  for (const auto& d : *shape) {
    MT_REQUIRE(d.is_number_unsigned(), "safetensors file {}: tensor '{}' has a bad shape {}", path.string(), name,
               shape->dump());
    const auto n = d.get<std::uint64_t>();
    MT_REQUIRE(n == 0 || numel <= (std::uint64_t{1} << 60) / n,
               "safetensors file {}: tensor '{}' shape {} is too large", path.string(), name, shape->dump());
    numel *= n;
    t.shape.push_back(static_cast<int64_t>(n));
  }

  const auto offsets = entry.find("data_offsets");
  MT_REQUIRE(offsets != entry.end() && offsets->is_array() && offsets->size() == 2 &&
                 (*offsets)[0].is_number_unsigned() && (*offsets)[1].is_number_unsigned(),
             "safetensors file {}: tensor '{}' has no valid data_offsets", path.string(), name);
  const auto begin = (*offsets)[0].get<std::uint64_t>();
  const auto end = (*offsets)[1].get<std::uint64_t>();
  MT_REQUIRE(begin <= end && end <= data_size,
             "safetensors file {}: tensor '{}' data_offsets [{}, {}] lie outside the data area ({} bytes)",
             path.string(), name, begin, end, data_size);
  MT_REQUIRE(end - begin == numel * info->size,
             "safetensors file {}: tensor '{}' holds {} bytes but shape {} of {} needs {}", path.string(), name,
             end - begin, shape->dump(), info->name, numel * info->size);
  t.data = data + begin;
  t.nbytes = static_cast<std::size_t>(end - begin);
  return t;
}

// The format requires the tensors' byte ranges, in offset order, to tile the data region exactly: the first
// starts at 0, each starts where the previous ends, the last ends at the end of the file. A gap, an overlap or
// trailing bytes mean the header and the data disagree; such a file is refused rather than read shifted.
void require_tiled(const std::map<std::string, StTensor>& tensors, const std::byte* data, std::size_t data_size,
                   std::uint64_t header_len, const fs::path& path) {
  std::vector<const StTensor*> order;
  for (const auto& [name, t] : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const StTensor* a, const StTensor* b) {
    return a->data != b->data ? a->data < b->data : a->nbytes < b->nbytes;
  });
  std::size_t end = 0;
  const StTensor* previous = nullptr;
  const auto before = [&] { return previous ? "tensor '" + previous->name + "' ends" : std::string("the data region starts"); };
  for (const StTensor* t : order) {
    const auto begin = static_cast<std::size_t>(t->data - data);
    MT_REQUIRE(begin >= end, "safetensors file {}: tensor '{}' data_offsets [{}, {}] overlap: {} at {}", path.string(),
               t->name, begin, begin + t->nbytes, before(), end);
    MT_REQUIRE(begin == end, "safetensors file {}: tensor '{}' data_offsets [{}, {}] leave a gap: {} at {} ({} bytes "
               "between)", path.string(), t->name, begin, begin + t->nbytes, before(), end, begin - end);
    end = begin + t->nbytes;
    previous = t;
  }
  MT_REQUIRE(end == data_size,
             "safetensors file {}: {} bytes after the last tensor: the file holds {} bytes, not 8 + header {} + "
             "tensors {} = {}",
             path.string(), data_size - end, 8 + header_len + data_size, header_len, end, 8 + header_len + end);
}

// The temporary file being written, and how far: a failed write names the OS error and the bytes.
struct Output {
  int fd = -1;
  fs::path tmp;
  std::uint64_t written = 0, total = 0;
};

void write_all(Output& out, const void* buf, std::size_t n) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    errno = 0;
    const ssize_t w = ::write(out.fd, p, std::min<std::size_t>(n, std::size_t{1} << 30));
    if (w < 0 && errno == EINTR) continue;
    MT_REQUIRE(w > 0, "{}: writing safetensors file {} failed after {} of {} bytes",
               errno ? os_error_first(errno) : std::string("no progress"), out.tmp.string(), out.written, out.total);
    p += w;
    n -= static_cast<std::size_t>(w);
    out.written += static_cast<std::uint64_t>(w);
  }
}

void fsync_dir(const fs::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: the file itself is already durable
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

const char* st_dtype_name(StDType t) { return dtype_info(t).name; }

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t StTensor::numel() const {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

SafetensorsFile::SafetensorsFile(const fs::path& path) {
  require_regular_file(path, "safetensors file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  MT_REQUIRE(fd >= 0, "safetensors file {}: cannot open: {}", path.string(), errno_text());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string why = errno_text();
    ::close(fd);
    MT_REQUIRE(false, "safetensors file {}: cannot stat: {}", path.string(), why);
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ >= 8) {
    map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map_ == MAP_FAILED) map_ = nullptr;
  }
  const std::string map_error = errno_text();
  ::close(fd);
  MT_REQUIRE(size_ >= 8, "safetensors file {}: truncated ({} bytes, no header length)", path.string(), size_);
  MT_REQUIRE(map_ != nullptr, "safetensors file {}: mmap failed: {}", path.string(), map_error);

  try {
    const auto* bytes = static_cast<const std::byte*>(map_);
    std::uint64_t header_len = 0;
    std::memcpy(&header_len, bytes, 8);
    MT_REQUIRE(header_len <= size_ - 8, "safetensors file {}: header length {} exceeds the file ({} bytes)",
               path.string(), header_len, size_);
    const char* header = reinterpret_cast<const char*>(bytes + 8);
    require_json_depth(std::string_view(header, static_cast<size_t>(header_len)),
                       "safetensors file " + path.string() + ": header");
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(header, header + header_len);
    } catch (const nlohmann::json::exception& e) {
      MT_REQUIRE(false, "safetensors file {}: header is not valid JSON: {}", path.string(), e.what());
    }
    MT_REQUIRE(j.is_object(), "safetensors file {}: header is not a JSON object", path.string());
    const std::byte* data = bytes + 8 + header_len;
    const std::size_t data_size = size_ - 8 - static_cast<std::size_t>(header_len);
    for (const auto& [key, value] : j.items()) {
      if (key == "__metadata__") {
        MT_REQUIRE(value.is_object(), "safetensors file {}: __metadata__ is not an object", path.string());
        for (const auto& [mk, mv] : value.items()) metadata_[mk] = mv.is_string() ? mv.get<std::string>() : mv.dump();
        continue;
      }
      tensors_.emplace(key, parse_entry(key, value, path, data, data_size));
    }
    require_tiled(tensors_, data, data_size, header_len, path);
  } catch (...) {
    ::munmap(map_, size_);
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, size_);
}

SafetensorsModel::SafetensorsModel(const fs::path& dir) : dir_(dir) {
  const fs::path single = dir / "model.safetensors";
  const fs::path index_path = dir / "model.safetensors.index.json";
  if (fs::is_regular_file(single)) {
    files_.push_back(std::make_unique<SafetensorsFile>(single));
    for (const auto& [name, t] : files_.back()->tensors()) index_[name] = &t;
    return;
  }
  MT_REQUIRE(fs::is_regular_file(index_path),
             "model dir {}: neither model.safetensors nor model.safetensors.index.json is present", dir.string());

  nlohmann::json index;
  try {
    std::ifstream in(index_path);
    MT_REQUIRE(in.good(), "safetensors index {}: cannot open", index_path.string());
    const std::string text(std::istreambuf_iterator<char>(in), {});
    require_json_depth(text, "safetensors index " + index_path.string());
    index = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    MT_REQUIRE(false, "safetensors index {}: not valid JSON: {}", index_path.string(), e.what());
  }
  const auto weight_map = index.is_object() ? index.find("weight_map") : index.end();
  MT_REQUIRE(index.is_object() && weight_map != index.end() && weight_map->is_object(),
             "safetensors index {}: no weight_map object", index_path.string());

  std::map<std::string, const SafetensorsFile*> shards;
  for (const auto& [name, shard_value] : weight_map->items()) {
    MT_REQUIRE(shard_value.is_string(), "safetensors index {}: weight_map entry '{}' is not a file name",
               index_path.string(), name);
    const auto shard = shard_value.get<std::string>();
    MT_REQUIRE(!shard.empty() && fs::path(shard).filename() == shard,
               "safetensors index {}: shard '{}' of tensor '{}' is not a file name in the directory",
               index_path.string(), shard, name);
    auto it = shards.find(shard);
    if (it == shards.end()) {
      files_.push_back(std::make_unique<SafetensorsFile>(dir / shard));
      it = shards.emplace(shard, files_.back().get()).first;
    }
    const auto t = it->second->tensors().find(name);
    MT_REQUIRE(t != it->second->tensors().end(), "safetensors index {}: tensor '{}' is not in its shard {}",
               index_path.string(), name, shard);
    index_[name] = &t->second;
  }
}

const StTensor* SafetensorsModel::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

std::vector<std::string> SafetensorsModel::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& [name, t] : index_) out.push_back(name);
  return out;
}

namespace {

// dst[i] = t's element i as T, for the floating dtypes (read_as_f32, read_as_f64).
template <typename T>
void read_floats(const StTensor& t, T* dst) {
  const int64_t n = t.numel();
  switch (t.dtype) {
    case StDType::F32:
    case StDType::F64:
#pragma omp parallel for schedule(static) if (n > (int64_t{1} << 20))
      for (int64_t i = 0; i < n; ++i) {
        if (t.dtype == StDType::F32) {
          float x;
          std::memcpy(&x, t.data + 4 * i, 4);  // the data area need not be aligned
          dst[i] = static_cast<T>(x);
        } else {
          double x;
          std::memcpy(&x, t.data + 8 * i, 8);
          dst[i] = static_cast<T>(x);
        }
      }
      return;
    case StDType::BF16:
    case StDType::F16: {
      const bool bf16 = t.dtype == StDType::BF16;
#pragma omp parallel for schedule(static) if (n > (int64_t{1} << 20))
      for (int64_t i = 0; i < n; ++i) {
        std::uint16_t h;
        std::memcpy(&h, t.data + 2 * i, 2);
        dst[i] = static_cast<T>(bf16 ? bf16_to_f32(h) : f16_to_f32(h));
      }
      return;
    }
    default:
      MT_REQUIRE(false, "safetensors file {}: tensor '{}' has dtype {}, expected F32, F64, BF16 or F16",
                 t.file.string(), t.name, dtype_info(t.dtype).name);
  }
}

}  // namespace

void read_as_f32(const StTensor& t, float* dst) {
  if (t.dtype == StDType::F32) {
    std::memcpy(dst, t.data, t.nbytes);
    return;
  }
  read_floats(t, dst);
}

void read_as_f64(const StTensor& t, double* dst) { read_floats(t, dst); }

std::size_t StWriteTensor::nbytes(DType dtype) const {
  if (raw) return raw->nbytes;
  int64_t numel = 1;
  for (const int64_t d : shape) numel *= d;
  return static_cast<std::size_t>(numel) * dtype_size(dtype);
}

void write_safetensors(const fs::path& path, const std::vector<StWriteTensor>& tensors, DType dtype,
                       const std::map<std::string, std::string>& metadata) {
  const std::size_t elem = dtype_size(dtype);
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  std::set<std::string> seen;
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    MT_REQUIRE(t.name != "__metadata__" && seen.insert(t.name).second,
               "safetensors file {}: tensor name '{}' is reserved or repeated", path.string(), t.name);
    int64_t numel = 1;
    for (const int64_t d : t.shape) {
      MT_REQUIRE(d >= 0, "safetensors file {}: tensor '{}' has a negative dimension", path.string(), t.name);
      numel *= d;
    }
    MT_REQUIRE(numel == 0 || t.data != nullptr || t.raw != nullptr || t.fill, "safetensors file {}: tensor '{}' has no data",
               path.string(), t.name);
    MT_REQUIRE(!t.raw || t.raw->shape == t.shape, "safetensors file {}: tensor '{}' changes shape", path.string(), t.name);
    const std::uint64_t nbytes = t.raw ? t.raw->nbytes : static_cast<std::uint64_t>(numel) * elem;
    header[t.name] = {{"dtype", t.raw ? dtype_info(t.raw->dtype).name : dtype == DType::f32 ? "F32" : "BF16"},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // as the reference implementation pads
  const std::uint64_t header_len = text.size();

  const fs::path tmp = path.string() + ".tmp-" + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  MT_REQUIRE(fd >= 0, "{}: cannot create safetensors file {}", os_error_first(errno), tmp.string());
  Output out{fd, tmp, 0, 8 + header_len + offset};
  try {
    write_all(out, &header_len, 8);
    write_all(out, text.data(), text.size());
    std::vector<std::uint16_t> chunk;
    std::vector<float> made;  // a fill tensor's values
    for (const auto& t : tensors) {
      int64_t numel = 1;
      for (const int64_t d : t.shape) numel *= d;
      if (t.raw) {
        write_all(out, t.raw->data, t.raw->nbytes);
        continue;
      }
      const float* data = t.data;
      if (!data && numel > 0) {
        made.resize(static_cast<std::size_t>(numel));
        t.fill(made.data());
        data = made.data();
      }
      if (dtype == DType::f32) {
        write_all(out, data, static_cast<std::size_t>(numel) * 4);
        continue;
      }
      constexpr int64_t kChunk = int64_t{1} << 20;
      chunk.resize(static_cast<std::size_t>(std::min(numel, kChunk)));
      for (int64_t start = 0; start < numel; start += kChunk) {
        const int64_t n = std::min(kChunk, numel - start);
        for (int64_t i = 0; i < n; ++i) chunk[static_cast<std::size_t>(i)] = f32_to_bf16(data[start + i]);
        write_all(out, chunk.data(), static_cast<std::size_t>(n) * 2);
      }
    }
    MT_REQUIRE(::fsync(fd) == 0, "{}: fsync of safetensors file {} failed after writing {} bytes",
               os_error_first(errno), tmp.string(), out.written);
    const int closed = ::close(fd);
    fd = -1;
    MT_REQUIRE(closed == 0, "{}: close of safetensors file {} failed after writing {} bytes", os_error_first(errno),
               tmp.string(), out.written);
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    MT_REQUIRE(false, "safetensors file {}: cannot rename {} into place: {}", path.string(), tmp.string(), why);
  }
  fsync_dir(path.parent_path());
}

}  // namespace mt
