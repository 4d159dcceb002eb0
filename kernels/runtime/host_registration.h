// HostRegistration: page-locks ranges of host memory (the host store's buffers) for DMA for its lifetime.
// Invariant: every range it registered is unregistered when it is destroyed; a range that cannot be locked is a
// one-line error naming the size and the usual cause.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "core/error.h"

namespace mt {

class HostRegistration {
 public:
  HostRegistration() = default;
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;
  void add(void* p, int64_t bytes) {
    if (!p || bytes <= 0) return;
    const cudaError_t err = cudaHostRegister(p, static_cast<size_t>(bytes), cudaHostRegisterDefault);
    MT_REQUIRE(err == cudaSuccess,
               "cannot page-lock {:.2f} GiB of the host store for DMA: {} (check `ulimit -l`, the locked-memory "
               "limit)",
               bytes / 1073741824.0, cudaGetErrorString(err));
    ranges_.push_back(p);
  }
  ~HostRegistration() {
    for (void* p : ranges_) cudaHostUnregister(p);
  }

 private:
  std::vector<void*> ranges_;
};

}  // namespace mt
