// FP8 block-quantised weights: config check, e4m3fn decoding and dequantisation (see fp8_blocks.h).
#include "model/fp8_blocks.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace mt {
namespace {

int64_t blocks(int64_t n) { return (n + kFp8BlockSize - 1) / kFp8BlockSize; }

void require_text(const ConfigKeys& q, const char* key, std::initializer_list<const char*> accepted,
                  const char* why) {
  if (!q.has(key)) return;
  const std::string value = q.string(key, "");
  for (const char* a : accepted)
    if (value == a) return;
  MT_REQUIRE(false, "model config {}: key '{}{}' is '{}'; {}", q.origin, q.where, key, value, why);
}

}  // namespace

bool parse_fp8_quantization(const ConfigKeys& top) {
  const ConfigKeys q = top.object("quantization_config");
  if (q.string("quant_method", "") != "fp8") return false;
  require_text(q, "fmt", {"e4m3", "float8_e4m3fn"}, "FP8 weights are read as e4m3 (fmt e4m3)");
  require_text(q, "activation_scheme", {"dynamic"},
               "FP8 weights are dequantised on load, which reads activation_scheme dynamic only (no activation "
               "scales)");
  require_text(q, "scale_fmt", {"float"}, "FP8 block scales are read as floats (scale_fmt float)");
  require_text(q, "expert_dtype", {"fp8"}, "experts are read as FP8 (expert_dtype fp8)");
  if (q.has("weight_block_size")) {
    const nlohmann::json& size = q.at("weight_block_size");
    MT_REQUIRE(size == nlohmann::json::array({kFp8BlockSize, kFp8BlockSize}),
               "model config {}: key 'quantization_config.weight_block_size' is {}; FP8 weights are read in blocks of "
               "[{}, {}]", top.origin, size.dump(), kFp8BlockSize, kFp8BlockSize);
  } else {
    MT_REQUIRE(!q.j.contains("weight_block_size"),
               "model config {}: key 'quantization_config.weight_block_size' is null (one scale per tensor); FP8 "
               "weights are read in blocks of [{}, {}]", top.origin, kFp8BlockSize, kFp8BlockSize);
  }
  if (q.has("modules_to_convert")) {
    const nlohmann::json& convert = q.at("modules_to_convert");
    MT_REQUIRE(convert.is_array() && convert.empty(),
               "model config {}: key 'quantization_config.modules_to_convert' is {}; FP8 embedding tables are not "
               "read", top.origin, convert.dump());
  }
  // modules_to_not_convert (or MiniMax's ignored_layers) lists the modules kept unquantised: their tensors are
  // stored in another dtype, and read_weight_f32 reads every tensor by its stored dtype.
  for (const char* key : {"modules_to_not_convert", "ignored_layers"}) {
    if (!q.has(key)) continue;
    const nlohmann::json& names = q.at(key);
    bool strings = names.is_array();
    for (const auto& n : names) strings = strings && n.is_string();
    MT_REQUIRE(strings, "model config {}: key 'quantization_config.{}' must be a list of module names, got {}",
               top.origin, key, names.dump());
  }
  return true;
}

float e4m3fn_to_f32(uint8_t code) {
  const bool negative = code & 0x80;
  const int exponent = (code >> 3) & 0x0f, mantissa = code & 0x07;
  if (exponent == 0x0f && mantissa == 0x07) return std::nanf("");
  const float magnitude = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -9)
                                        : std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
  return negative ? -magnitude : magnitude;
}

std::string fp8_scale_name(const std::string& weight_name) { return weight_name + "_scale_inv"; }

const StTensor* fp8_scale_of(const SafetensorsModel& weights, const StTensor& t, bool fp8_blocks) {
  const std::string file = t.file.filename().string();
  if (t.dtype != StDType::F8_E4M3) {  // transformers would scale it all the same: a checkpoint we do not read exactly
    const StTensor* stray = fp8_blocks ? weights.find(fp8_scale_name(t.name)) : nullptr;
    MT_REQUIRE(stray == nullptr, "model dir {}: tensor '{}' in {} has block scales '{}' but is {}, not F8_E4M3",
               weights.dir().string(), t.name, file, fp8_scale_name(t.name), st_dtype_name(t.dtype));
    return nullptr;
  }
  MT_REQUIRE(fp8_blocks,
             "model dir {}: tensor '{}' in {} is F8_E4M3, but config.json has no quantization_config with quant_method "
             "fp8 to say how to dequantise it", weights.dir().string(), t.name, file);
  MT_REQUIRE(t.shape.size() >= 2, "model dir {}: tensor '{}' in {} is F8_E4M3 of shape {}; FP8 blocks need a matrix",
             weights.dir().string(), t.name, file, shape_text(t.shape));
  const StTensor* scale = weights.find(fp8_scale_name(t.name));
  MT_REQUIRE(scale != nullptr, "model dir {}: tensor '{}' in {} is F8_E4M3 but its scale '{}' is not found",
             weights.dir().string(), t.name, file, fp8_scale_name(t.name));
  std::vector<int64_t> expected(t.shape.begin(), t.shape.end() - 2);
  expected.push_back(blocks(t.shape[t.shape.size() - 2]));
  expected.push_back(blocks(t.shape.back()));
  MT_REQUIRE(scale->shape == expected,
             "model dir {}: tensor '{}' in {} has shape {}, expected {} (one scale per {}×{} block of '{}' {})",
             weights.dir().string(), scale->name, scale->file.filename().string(), shape_text(scale->shape),
             shape_text(expected), kFp8BlockSize, kFp8BlockSize, t.name, shape_text(t.shape));
  const bool floating = scale->dtype == StDType::F32 || scale->dtype == StDType::BF16 ||
                        scale->dtype == StDType::F16 || scale->dtype == StDType::F64;
  MT_REQUIRE(floating, "model dir {}: tensor '{}' in {} has dtype {}; FP8 block scales are F32, BF16, F16 or F64",
             weights.dir().string(), scale->name, scale->file.filename().string(), st_dtype_name(scale->dtype));
  return scale;
}

void dequantise_fp8_blocks(const StTensor& t, const StTensor& scale_inv, float* dst) {
  const int64_t rows = t.shape[t.shape.size() - 2], cols = t.shape.back();
  const int64_t row_blocks = blocks(rows), col_blocks = blocks(cols);
  std::vector<float> scale(static_cast<size_t>(scale_inv.numel()));
  read_as_f32(scale_inv, scale.data());
  for (size_t s = 0; s < scale.size(); ++s)
    MT_REQUIRE(std::isfinite(scale[s]),
               "safetensors file {}: tensor '{}' element {} is {}: a block scale must be finite",
               scale_inv.file.string(), scale_inv.name, s, scale[s]);
  const auto* code = reinterpret_cast<const uint8_t*>(t.data);
  float value[256];
  for (int c = 0; c < 256; ++c) value[c] = e4m3fn_to_f32(static_cast<uint8_t>(c));
  const int64_t n = t.numel(), matrix_rows = n / std::max<int64_t>(cols, 1);  // every matrix's rows in turn
  int64_t first_nan = n;
#pragma omp parallel for schedule(static) reduction(min : first_nan) if (n > (int64_t{1} << 16))
  for (int64_t r = 0; r < matrix_rows; ++r) {
    const int64_t m = r / rows, i = r % rows;
    const float* row_scale = scale.data() + (m * row_blocks + i / kFp8BlockSize) * col_blocks;
    for (int64_t j = 0; j < cols; ++j) {
      const uint8_t c = code[r * cols + j];
      if ((c & 0x7f) == 0x7f) first_nan = std::min(first_nan, r * cols + j);
      dst[r * cols + j] = value[c] * row_scale[j / kFp8BlockSize];
    }
  }
  MT_REQUIRE(first_nan == n, "safetensors file {}: tensor '{}' element {} is the e4m3 NaN code 0x{:02x}",
             t.file.string(), t.name, first_nan, first_nan < n ? code[first_nan] : 0);
}

void read_weight_f32(const SafetensorsModel& weights, const StTensor& t, bool fp8_blocks, float* dst) {
  if (const StTensor* scale_inv = fp8_scale_of(weights, t, fp8_blocks))
    dequantise_fp8_blocks(t, *scale_inv, dst);
  else
    read_as_f32(t, dst);
}

}  // namespace mt
