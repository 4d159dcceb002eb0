// Tensor checksums and the finiteness scan (see tensor_checksum.h).
#include "core/tensor_checksum.h"

#include <cstring>

namespace mt {

uint64_t tensor_checksum(const float* values, int64_t first_index, int64_t count) {
  uint64_t sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < count; ++i) {
    uint32_t bits;
    std::memcpy(&bits, values + i, 4);
    const auto index = static_cast<uint32_t>(first_index + i);
    sum += static_cast<uint32_t>((bits ^ (index * 0x85EBCA6Bu)) * 0x9E3779B1u);  // odd factors: one-to-one in bits
  }
  return sum;
}

int64_t first_non_finite(const float* values, int64_t count) {
  bool any = false;
#pragma omp simd reduction(| : any)
  for (int64_t i = 0; i < count; ++i) {
    uint32_t bits;
    std::memcpy(&bits, values + i, 4);
    any |= (bits & 0x7F800000u) == 0x7F800000u;  // all exponent bits set: an infinity or a NaN
  }
  if (!any) return -1;
  for (int64_t i = 0; i < count; ++i) {
    uint32_t bits;
    std::memcpy(&bits, values + i, 4);
    if ((bits & 0x7F800000u) == 0x7F800000u) return i;
  }
  return -1;
}

}  // namespace mt
