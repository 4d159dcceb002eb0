// H5Handle: RAII ownership of one HDF5 identifier (file, group, dataset, dataspace, attribute, type or
// property list), closed with H5Oclose/H5Sclose/... by its kind; and h5_check, which turns a negative HDF5
// return into an mt::Error naming the file and the object. Invariant: every identifier this module opens is
// held by exactly one H5Handle, so an error path never leaks an open file. Writes are checked by check_write,
// whose message carries HDF5's own error stack (the MPI-IO or OS error at its bottom), not a reader's guess.
#pragma once
#include <hdf5.h>

#include <string>

#include "core/error.h"

namespace mt::h5 {

class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : id_(o.id_) { o.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      o.id_ = H5I_INVALID_HID;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  hid_t release() {  // the caller closes it (and checks the close: a file's close writes its metadata)
    const hid_t id = id_;
    id_ = H5I_INVALID_HID;
    return id;
  }
  void reset() {
    if (id_ >= 0 && H5Iis_valid(id_) > 0) H5Idec_ref(id_);
    id_ = H5I_INVALID_HID;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

// Silences HDF5's own error stack printing: failures surface as one mt::Error line instead.
void quiet_errors();

// A negative id or status is an error "<file>: <what>: HDF5 call failed".
hid_t check(hid_t id, const std::string& file, const std::string& what);

// For writes: a negative id or status is an error "<file>: <what> failed: <HDF5's error stack, innermost last>".
hid_t check_write(hid_t id, const std::string& file, const std::string& what);

}  // namespace mt::h5
