// Selecting a flat element range of a tensor stored in its HF shape: the range [begin, end) in row-major order
// of an N-D dataset is a union of boxes (along each dimension a partial first slice, whole slices, a partial last
// slice, the partial ones recursively). Invariant: the selection's elements, in HDF5's row-major order, are exactly elements begin..end-1.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mt {

void select_flat_range(hid_t space, const std::vector<int64_t>& shape, int64_t begin, int64_t end,
                       const std::string& file, const std::string& name);

}  // namespace mt
