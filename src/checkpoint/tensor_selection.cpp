// Flat-range hyperslab selection (see tensor_selection.h).
#include "checkpoint/tensor_selection.h"

#include "checkpoint/h5_handle.h"
#include "core/error.h"

namespace mt {

void select_flat_range(hid_t space, const std::vector<int64_t>& shape, int64_t begin, int64_t end,
                       const std::string& file, const std::string& name) {
  MT_REQUIRE(shape.size() == 1 || shape.size() == 2, "{}: {}: tensors of {} dimensions are not supported", file,
             name, shape.size());
  bool first = true;
  auto add = [&](hsize_t r, hsize_t c, hsize_t rows, hsize_t cols) {
    const hsize_t start2[2] = {r, c}, count2[2] = {rows, cols};
    const hsize_t start1[1] = {c}, count1[1] = {cols};
    const bool one = shape.size() == 1;
    h5::check(H5Sselect_hyperslab(space, first ? H5S_SELECT_SET : H5S_SELECT_OR, one ? start1 : start2, nullptr,
                                  one ? count1 : count2, nullptr),
              file, name + " hyperslab");
    first = false;
  };
  if (shape.size() == 1) {
    add(0, static_cast<hsize_t>(begin), 1, static_cast<hsize_t>(end - begin));
    return;
  }
  const int64_t cols = shape[1];
  int64_t r0 = begin / cols, c0 = begin % cols;
  const int64_t r1 = end / cols, c1 = end % cols;
  if (r0 == r1) {
    add(r0, c0, 1, c1 - c0);
    return;
  }
  if (c0 > 0) add(r0++, c0, 1, cols - c0);
  if (r1 > r0) add(r0, 0, r1 - r0, cols);
  if (c1 > 0) add(r1, 0, 1, c1);
}

}  // namespace mt
