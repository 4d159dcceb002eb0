// Comparing an emulated kernel's fp32 or bf16 elements with a reference's, for the drivers of this folder (glu.cpp,
// cross_entropy.cpp): an element's bits, the distance of two in representable values, and NaN sentinels for the
// elements a kernel must not write.
// Invariant: a hand-run tool, never part of the build.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "emu_cuda.h"

template <typename E>
uint32_t bits(E x) {
  if constexpr (sizeof(E) == 4) {
    uint32_t b;
    std::memcpy(&b, &x, 4);
    return b;
  } else {
    return x.x;
  }
}

// Distance in representable values of E; 0 for two NaNs of the same bits, huge for any other NaN on either side.
template <typename E>
int64_t ulps(E a, E b) {
  const float fa = mt::cuda::to_f32(a), fb = mt::cuda::to_f32(b);
  if (std::isnan(fa) || std::isnan(fb)) return std::isnan(fa) && std::isnan(fb) && bits(a) == bits(b) ? 0 : 1 << 30;
  const auto ordered = [](uint32_t u, int w) {
    const uint32_t sign = 1u << (w - 1);
    return u & sign ? -static_cast<int64_t>(u & (sign - 1)) : static_cast<int64_t>(u);
  };
  const int w = 8 * static_cast<int>(sizeof(E));
  return std::llabs(ordered(bits(a), w) - ordered(bits(b), w));
}

// A quiet NaN whose payload is k (distinct sentinels tell which element a stray write came from).
template <typename E>
E sentinel(int64_t k) {
  if constexpr (sizeof(E) == 4) {
    const uint32_t b = 0x7fc00000u | static_cast<uint32_t>(k & 0x3fffff);
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  } else {
    return {static_cast<uint16_t>(0x7fc0u | (k & 0x3f))};
  }
}
