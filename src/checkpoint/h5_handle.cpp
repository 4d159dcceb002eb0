// HDF5 error handling for the checkpoint module (see h5_handle.h).
#include "checkpoint/h5_handle.h"

#include <algorithm>
#include <string>
#include <vector>

namespace mt::h5 {

void quiet_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

hid_t check(hid_t id, const std::string& file, const std::string& what) {
  MT_REQUIRE(id >= 0, "{}: {}: HDF5 call failed (not a readable checkpoint?)", file, what);
  return id;
}

namespace {

// The descriptions on HDF5's error stack, innermost last, without repeats.
herr_t collect_error(unsigned, const H5E_error2_t* e, void* out) {
  auto& descs = *static_cast<std::vector<std::string>*>(out);
  const std::string desc = e->desc ? e->desc : "";
  if (!desc.empty() && std::find(descs.begin(), descs.end(), desc) == descs.end()) descs.push_back(desc);
  return 0;
}

}  // namespace

hid_t check_write(hid_t id, const std::string& file, const std::string& what) {
  if (id >= 0) return id;
  std::vector<std::string> descs;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_error, &descs);
  H5Eclear2(H5E_DEFAULT);
  // The innermost three say where it failed (the driver's write); the outer ones only repeat that it did.
  std::string stack;
  for (size_t i = descs.size() > 3 ? descs.size() - 3 : 0; i < descs.size(); ++i) stack += (stack.empty() ? "" : "; ") + descs[i];
  throw Error(fmt::format("{}: {} failed (HDF5: {})", file, what, stack.empty() ? "no reason given" : stack));
}

}  // namespace mt::h5
