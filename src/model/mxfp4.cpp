// MXFP4 dequantisation of GPT-OSS expert tensors (see mxfp4.h).
#include "model/mxfp4.h"

#include <cmath>

#include "core/error.h"

namespace mt {
namespace {

// FP4 e2m1 codes 0..15: sign bit 3, then 0, 0.5, 1, 1.5, 2, 3, 4, 6 (transformers' FP4_VALUES).
constexpr float kFp4Values[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                                  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

const StTensor& mxfp4_part(const SafetensorsModel& weights, const std::string& name, const std::string& part,
                           const std::vector<int64_t>& expected, const std::vector<int64_t>& shape) {
  const StTensor* t = weights.find(name + part);
  MT_REQUIRE(t != nullptr, "model dir {}: tensor '{}{}' not found (MXFP4 form of '{}')", weights.dir().string(), name,
             part, name);
  MT_REQUIRE(t->dtype == StDType::U8, "model dir {}: tensor '{}{}' in {} must be U8 (MXFP4 {})", weights.dir().string(),
             name, part, t->file.filename().string(), part == "_blocks" ? "FP4 codes" : "e8m0 scales");
  MT_REQUIRE(t->shape == expected,
             "model dir {}: tensor '{}{}' in {} has shape {}, expected {} (MXFP4 form of '{}' {})",
             weights.dir().string(), name, part, t->file.filename().string(), shape_text(t->shape),
             shape_text(expected), name, shape_text(shape));
  return *t;
}

}  // namespace

bool has_mxfp4(const SafetensorsModel& weights, const std::string& name) {
  return weights.find(name + "_blocks") != nullptr;
}

void read_mxfp4(const SafetensorsModel& weights, const std::string& name, const std::vector<int64_t>& shape,
                float* dst) {
  MT_ASSERT(shape.size() == 3, "MXFP4 tensor '{}' of shape {}", name, shape_text(shape));
  const int64_t E = shape[0], in = shape[1], out = shape[2];
  MT_REQUIRE(in % 32 == 0, "model dir {}: tensor '{}' {} cannot be MXFP4: its input dimension {} is not a multiple "
             "of 32", weights.dir().string(), name, shape_text(shape), in);
  const int64_t G = in / 32;
  const StTensor& blocks = mxfp4_part(weights, name, "_blocks", {E, out, G, 16}, shape);
  const StTensor& scales = mxfp4_part(weights, name, "_scales", {E, out, G}, shape);
  const auto* code = reinterpret_cast<const uint8_t*>(blocks.data);
  const auto* scale = reinterpret_cast<const uint8_t*>(scales.data);
#pragma omp parallel for schedule(static) if (E * out > 1024)
  for (int64_t row = 0; row < E * out; ++row) {  // row = e·out + r: the output column r of expert e
    const int64_t e = row / out, r = row % out;
    for (int64_t g = 0; g < G; ++g) {
      const int exponent = static_cast<int>(scale[row * G + g]) - 127;
      const uint8_t* bytes = code + (row * G + g) * 16;
      for (int64_t b = 0; b < 16; ++b) {
        const int64_t c = g * 32 + 2 * b;  // input index of the low nibble; the high nibble is c + 1
        dst[(e * in + c) * out + r] = std::ldexp(kFp4Values[bytes[b] & 0x0F], exponent);
        dst[(e * in + c + 1) * out + r] = std::ldexp(kFp4Values[bytes[b] >> 4], exponent);
      }
    }
  }
}

}  // namespace mt
