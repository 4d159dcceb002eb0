// Element types of stored and streamed tensors, and exact bf16 <-> fp32 conversion.
// Invariant: fp32 -> bf16 rounds to nearest even (as torch does); NaN stays NaN.
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace mt {

// f64 is the compute type of the CPU reference's fp64 build alone (core/real.h): never stored, streamed or configured.
enum class DType { f32, bf16, f64 };

constexpr std::size_t dtype_size(DType t) { return t == DType::f64 ? 8 : t == DType::f32 ? 4 : 2; }
std::string_view dtype_name(DType t);          // "float32" / "bfloat16" / "float64"
DType dtype_from_name(std::string_view name);  // accepts float32/fp32/bfloat16/bf16; throws mt::Error otherwise

inline std::uint16_t f32_to_bf16(float x) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}
inline float bf16_to_f32(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }
inline float round_to_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }

}  // namespace mt
