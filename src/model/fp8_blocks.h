// FP8 block-quantised checkpoints (config.json quantization_config quant_method "fp8": DeepSeek-V3/R1, Kimi K2 and
// the other fine-grained FP8 releases): a linear weight `W` [..., rows, cols] is stored as F8_E4M3 (e4m3fn: no
// infinities, codes 0x7f and 0xff NaN) with a sibling `W_scale_inv` [..., ceil(rows/128), ceil(cols/128)] (a float
// dtype), and W[i, j] = fp32(code[i, j]) · fp32(scale_inv[i/128, j/128]): one fp32 product, the edge blocks partial
// (DeepSeek's weight_dequant, transformers' _dequantize_fp8_weight). Tensors stored in another dtype (norms,
// embeddings, lm_head, the router, modules_to_not_convert) are read as they are.
// Invariant: a dequantised value is exactly that product; a NaN code, a non-finite scale, an F8 tensor without its
// scale (or in a model whose config does not say fp8), a scale of another shape or dtype or beside a tensor that is
// not F8, and a quantization_config we do not read exactly are refused in one line naming the file, the tensor or
// key, and the value.
#pragma once
#include <cstdint>
#include <string>

#include "io/safetensors.h"
#include "model/config_keys.h"

namespace mt {

inline constexpr int64_t kFp8BlockSize = 128;  // weight_block_size [128, 128], the only one accepted

// Whether config.json's quantization_config says FP8 blocks (quant_method fp8), after checking that its fmt (e4m3),
// weight_block_size ([128, 128]), activation_scheme (dynamic), scale_fmt (float), expert_dtype (fp8) and
// modules_to_convert (none) describe exactly what read_weight_f32 decodes; false without quantization_config or
// for another quant_method (GPT-OSS's mxfp4 is its family's).
bool parse_fp8_quantization(const ConfigKeys& top);

// The value of e4m3fn code `code` (sign, 4 exponent bits of bias 7, 3 mantissa bits; exponent 0 subnormal;
// 0x7f and 0xff NaN).
float e4m3fn_to_f32(uint8_t code);

std::string fp8_scale_name(const std::string& weight_name);  // "<weight_name>_scale_inv"

// The validated scale tensor of `t`, a tensor of `weights`, when t is F8_E4M3 (refused unless fp8_blocks, the
// model's parse_fp8_quantization); nullptr for any other dtype (refused where fp8_blocks and t has a scale tensor).
const StTensor* fp8_scale_of(const SafetensorsModel& weights, const StTensor& t, bool fp8_blocks);

// dst[t.numel()] = t dequantised with its scale tensor (F8_E4M3 `t`, `scale_inv` from fp8_scale_of).
void dequantise_fp8_blocks(const StTensor& t, const StTensor& scale_inv, float* dst);

// t's values in fp32: an F8_E4M3 tensor dequantised (refused unless fp8_blocks, the model's
// parse_fp8_quantization), any other as read_as_f32 reads it.
void read_weight_f32(const SafetensorsModel& weights, const StTensor& t, bool fp8_blocks, float* dst);

}  // namespace mt
