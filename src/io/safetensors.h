// safetensors files: read through mmap (single file or sharded with model.safetensors.index.json), write atomically.
// Invariant: a reader never returns a tensor whose byte range lies outside its file; a writer leaves either
// the complete file or nothing at the destination path (temporary name, then rename).
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace mt {

// U8: MXFP4 blocks and scales (model/mxfp4.h); F8_E4M3: FP8 block-quantised weights (model/fp8_blocks.h)
enum class StDType { F32, F64, BF16, F16, I32, I64, U8, F8_E4M3 };

// The dtype's name in a safetensors header ("F8_E4M3").
const char* st_dtype_name(StDType t);
// A tensor shape as messages write it: "[2, 3]".
std::string shape_text(const std::vector<int64_t>& shape);

struct StTensor {
  std::string name;
  StDType dtype = StDType::F32;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;  // inside the mapping
  std::size_t nbytes = 0;
  std::filesystem::path file;       // for messages
  int64_t numel() const;
};

// One mapped .safetensors file.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);  // throws mt::Error naming the file
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  const std::map<std::string, StTensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  void* map_ = nullptr;
  std::size_t size_ = 0;
  std::map<std::string, StTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a model directory: model.safetensors, or the shards listed by model.safetensors.index.json.
class SafetensorsModel {
 public:
  explicit SafetensorsModel(const std::filesystem::path& dir);  // throws mt::Error naming the dir/file
  const StTensor* find(const std::string& name) const;          // nullptr if absent
  std::vector<std::string> names() const;
  const std::filesystem::path& dir() const { return dir_; }     // for messages

 private:
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const StTensor*> index_;
};

// Converts t's elements (F32, F64, BF16 or F16) to fp32 into dst[t.numel()] (F64 rounded to nearest); other dtypes
// (integers, F8_E4M3, which needs its block scales) are refused naming the file, the tensor and the dtype.
void read_as_f32(const StTensor& t, float* dst);
// The same into fp64, exactly (the parity tests' float64 references).
void read_as_f64(const StTensor& t, double* dst);

struct StWriteTensor {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;      // fp32 source, converted to the file dtype
  const StTensor* raw = nullptr;    // or a tensor of another file, written byte for byte in its own dtype
  std::function<void(float* dst)> fill = {};  // or fp32 values made on demand, just before the tensor is written
  std::size_t nbytes(DType dtype) const;  // bytes in the file
};

// Writes one safetensors file with every tensor in `dtype` (float32 or bfloat16) — raw ones in their own dtype —
// tensors in the given order; a `fill` tensor is made into one scratch buffer of its size only when its turn comes.
void write_safetensors(const std::filesystem::path& path, const std::vector<StWriteTensor>& tensors, DType dtype,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

}  // namespace mt
