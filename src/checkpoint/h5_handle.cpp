// HDF5 error handling for the checkpoint module (see h5_handle.h).
#include "checkpoint/h5_handle.h"

#include <string>

namespace mt::h5 {

void quiet_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

hid_t check(hid_t id, const std::string& file, const std::string& what) {
  MT_REQUIRE(id >= 0, "{}: {}: HDF5 call failed (not a readable checkpoint?)", file, what);
  return id;
}

namespace {

// The descriptions on HDF5's error stack, outermost first, without repeats.
herr_t collect_error(unsigned, const H5E_error2_t* e, void* out) {
  auto& text = *static_cast<std::string*>(out);
  const std::string desc = e->desc ? e->desc : "";
  if (!desc.empty() && text.find(desc) == std::string::npos) text += (text.empty() ? "" : "; ") + desc;
  return 0;
}

}  // namespace

hid_t check_write(hid_t id, const std::string& file, const std::string& what) {
  if (id >= 0) return id;
  std::string stack;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_error, &stack);
  H5Eclear2(H5E_DEFAULT);
  throw Error(fmt::format("{}: {} failed: {}", file, what, stack.empty() ? "HDF5 gave no reason" : stack));
}

}  // namespace mt::h5
