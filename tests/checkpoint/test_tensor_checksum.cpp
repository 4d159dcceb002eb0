// tensor_checksum: the parts of any split of a tensor add up to the whole's checksum (every rank adds its
// hyperslabs'), and one flipped bit anywhere, or two elements swapped, changes it; first_non_finite finds the first
// NaN or infinity and nothing in finite values (the largest, the smallest subnormal, -0).
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "catch.h"
#include "core/tensor_checksum.h"

TEST_CASE("a tensor's checksum is the sum of its parts' and sees every flipped bit", "[checkpoint]") {
  std::vector<float> values(1000);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (float& v : values) v = normal(rng);
  const uint64_t whole = mt::tensor_checksum(values.data(), 0, 1000);
  for (const int64_t cut : {0, 1, 333, 999, 1000})
    CHECK(mt::tensor_checksum(values.data(), 0, cut) + mt::tensor_checksum(values.data() + cut, cut, 1000 - cut) == whole);
  for (const int64_t element : {0, 517, 999})
    for (int bit = 0; bit < 32; ++bit) {
      std::vector<float> flipped = values;
      uint32_t bits;
      std::memcpy(&bits, &flipped[static_cast<size_t>(element)], 4);
      bits ^= 1u << bit;
      std::memcpy(&flipped[static_cast<size_t>(element)], &bits, 4);
      CHECK(mt::tensor_checksum(flipped.data(), 0, 1000) != whole);
    }
  std::vector<float> swapped = values;
  std::swap(swapped[10], swapped[20]);
  CHECK(mt::tensor_checksum(swapped.data(), 0, 1000) != whole);
}

TEST_CASE("first_non_finite finds the first NaN or infinity", "[checkpoint]") {
  std::vector<float> values = {std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(), -0.0f,
                               -std::numeric_limits<float>::max(), 1.0f};
  CHECK(mt::first_non_finite(values.data(), 5) == -1);
  values[3] = std::numeric_limits<float>::infinity();
  values[4] = std::nanf("");
  CHECK(mt::first_non_finite(values.data(), 5) == 3);
  CHECK(mt::first_non_finite(values.data() + 4, 1) == 0);
  values[3] = -std::numeric_limits<float>::infinity();
  CHECK(mt::first_non_finite(values.data(), 4) == 3);
}
