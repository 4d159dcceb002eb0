// Flat-range hyperslab selection (see tensor_selection.h).
#include "checkpoint/tensor_selection.h"

#include "checkpoint/h5_handle.h"
#include "core/error.h"

namespace mt {

void select_flat_range(hid_t space, const std::vector<int64_t>& shape, int64_t begin, int64_t end,
                       const std::string& file, const std::string& name) {
  MT_REQUIRE(!shape.empty(), "{}: {}: tensors of 0 dimensions are not supported", file, name);
  const size_t rank = shape.size();
  bool first = true;
  std::vector<hsize_t> start(rank), count(rank);
  // One box: dims before `dim` fixed at start[...] (count 1), dim `dim` from r over n, the dims after it whole.
  auto add = [&](size_t dim, int64_t r, int64_t n) {
    start[dim] = static_cast<hsize_t>(r);
    count[dim] = static_cast<hsize_t>(n);
    for (size_t d = dim + 1; d < rank; ++d) {
      start[d] = 0;
      count[d] = static_cast<hsize_t>(shape[d]);
    }
    h5::check(H5Sselect_hyperslab(space, first ? H5S_SELECT_SET : H5S_SELECT_OR, start.data(), nullptr, count.data(),
                                  nullptr),
              file, name + " hyperslab");
    first = false;
  };
  // Elements [b, e) of the sub-tensor at dims dim.. (indices before dim fixed), as boxes in row-major order.
  auto select = [&](auto& self, size_t dim, int64_t b, int64_t e) -> void {
    if (b >= e) return;
    int64_t inner = 1;
    for (size_t d = dim + 1; d < rank; ++d) inner *= shape[d];
    int64_t r0 = b / inner;
    const int64_t c0 = b % inner, r1 = e / inner, c1 = e % inner;
    if (dim + 1 == rank) {
      add(dim, b, e - b);
      return;
    }
    count[dim] = 1;
    if (r0 == r1) {
      start[dim] = static_cast<hsize_t>(r0);
      self(self, dim + 1, c0, c1);
      return;
    }
    if (c0 > 0) {
      start[dim] = static_cast<hsize_t>(r0++);
      count[dim] = 1;
      self(self, dim + 1, c0, inner);
    }
    if (r1 > r0) add(dim, r0, r1 - r0);
    if (c1 > 0) {
      start[dim] = static_cast<hsize_t>(r1);
      count[dim] = 1;
      self(self, dim + 1, 0, c1);
    }
  };
  for (size_t d = 0; d < rank; ++d) count[d] = 1;
  select(select, 0, begin, end);
}

}  // namespace mt
