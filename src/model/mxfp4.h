// GPT-OSS's expert tensors as OpenAI publishes them (quantization_config quant_method "mxfp4"): an HF tensor
// `name` [E, in, out] is stored as `name_blocks` [E, out, in/32, 16] (two FP4 e2m1 codes per byte, the low nibble
// first) and `name_scales` [E, out, in/32] (e8m0 exponents, bias 127), one scale per 32 consecutive inputs.
// Invariant: dequantisation is exact and equals transformers' convert_moe_packed_tensors (lookup, ldexp, transpose);
// blocks or scales of another dtype or shape are refused naming the model dir, the file and the tensor.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace mt {

// Whether `weights` hold `name` in MXFP4 form (its _blocks tensor exists).
bool has_mxfp4(const SafetensorsModel& weights, const std::string& name);
// Dequantises name_blocks / name_scales into dst (the HF tensor of `shape` [E, in, out], row-major, fp32).
void read_mxfp4(const SafetensorsModel& weights, const std::string& name, const std::vector<int64_t>& shape,
                float* dst);

}  // namespace mt
