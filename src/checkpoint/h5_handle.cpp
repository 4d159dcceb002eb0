// HDF5 error handling for the checkpoint module (see h5_handle.h).
#include "checkpoint/h5_handle.h"

namespace mt::h5 {

void quiet_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

hid_t check(hid_t id, const std::string& file, const std::string& what) {
  MT_REQUIRE(id >= 0, "{}: {}: HDF5 call failed (not a readable checkpoint?)", file, what);
  return id;
}

}  // namespace mt::h5
