// What a checkpoint's tensors are checked against on every read: a per-dataset checksum (the sum over its elements
// of a mix of each element's flat index and bits, modulo 2^64), stored as the dataset's uint64 attribute
// kChecksumAttribute, and finiteness. A sum is what lets every rank add its own hyperslabs' parts (any split of
// the elements gives the same total); the mix makes any changed bit of one element, and any two elements swapped,
// change it. Invariant: tensor_checksum over [0, n) equals the sum of tensor_checksum over any partition of it.
#pragma once
#include <cstdint>

namespace mt {

inline constexpr const char* kChecksumAttribute = "checksum";

// The part of a tensor's checksum of `count` values whose first has flat index `first_index`.
uint64_t tensor_checksum(const float* values, int64_t first_index, int64_t count);

// The index of the first NaN or infinity of values[0, count), or -1 when every value is finite.
int64_t first_non_finite(const float* values, int64_t count);

}  // namespace mt
