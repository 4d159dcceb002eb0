// Host-side checks shared by the kernel launchers: launch errors, CUDA runtime calls, stream-ordered scratch.
// Invariant: every failure throws mt::Error naming the op, its sizes and cudaGetErrorString; scratch memory is
// allocated and freed on the launcher's stream, so it never outlives the work enqueued on it.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include <string>

#include "core/check.h"
#include "core/error.h"

// After a kernel launch: MT_CHECK_LAUNCH("rmsnorm_forward", "N={} D={}", N, D).
#define MT_CHECK_LAUNCH(op, ...)                                                                 \
  do {                                                                                           \
    const cudaError_t mt_err_ = cudaGetLastError();                                              \
    if (mt_err_ != cudaSuccess) {                                                                \
      throw ::mt::Error(MT_FORMAT("CUDA kernel {} ({}) failed to launch: {}", op,                \
                                  MT_FORMAT(__VA_ARGS__), cudaGetErrorString(mt_err_)));         \
    }                                                                                            \
  } while (0)

// Around a CUDA runtime call made by a launcher: MT_CUDA_CHECK("attention_forward", cudaFuncSetAttribute(...)), the
// CUDA member of the check family (src/core/check.h) with the op named.
#define MT_CUDA_CHECK(op, call)                                                                            \
  MT_CHECK_CALL(throw_error, "CUDA", call, mt_rc_ == cudaSuccess,                                          \
                std::string(op) + ": " + cudaGetErrorString(mt_rc_))

namespace mt::cuda {

// Device scratch of n elements of E, allocated and freed in stream order (cudaMallocAsync / cudaFreeAsync).
template <typename E>
class Scratch {
 public:
  Scratch(const char* op, int64_t n, cudaStream_t s) : s_(s) {
    MT_ASSERT(n >= 0, "{}: negative scratch size {}", op, n);
    if (n > 0) {
      MT_CUDA_CHECK(op, cudaMallocAsync(reinterpret_cast<void**>(&p_), static_cast<size_t>(n) * sizeof(E), s));
    }
  }
  ~Scratch() {
    if (p_ != nullptr) cudaFreeAsync(p_, s_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  E* get() const { return p_; }

 private:
  E* p_ = nullptr;
  cudaStream_t s_;
};

// Number of multiprocessors of the current device (sizes grid-stride launches).
inline int sm_count() {
  int dev = 0, n = 0;
  MT_CUDA_CHECK("sm_count", cudaGetDevice(&dev));
  MT_CUDA_CHECK("sm_count", cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
  return n;
}

// Blocks for a grid-stride loop over `work` items with `threads` per block: enough to fill the device, no more.
inline unsigned grid_for(int64_t work, int threads, int blocks_per_sm = 8) {
  const int64_t need = (work + threads - 1) / threads;
  const int64_t cap = static_cast<int64_t>(sm_count()) * blocks_per_sm;
  return static_cast<unsigned>(need < 1 ? 1 : (need < cap ? need : cap));
}

inline bool is_aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Whether every pointer is 16-byte aligned and each count is a multiple of n (the elements of one 16-byte access),
// so that a kernel may move n elements per access.
inline bool vec_ok(int64_t n, std::initializer_list<int64_t> counts, std::initializer_list<const void*> ptrs) {
  for (int64_t c : counts) {
    if (c % n != 0) return false;
  }
  for (const void* p : ptrs) {
    if (!is_aligned(p, 16)) return false;
  }
  return true;
}

}  // namespace mt::cuda
