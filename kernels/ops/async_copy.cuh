// Asynchronous global → shared copies (sm_80's cp.async) for the tile loaders of the chunked delta rule: each
// thread's copies are in flight together until it waits for them, so a kernel's tile loads cost one memory latency.
// Invariant: a thread reads what it copied only after wait_async_copies(); other threads after that and a barrier.
#pragma once
#include <cuda_runtime.h>

namespace mt::cuda {

// 16 bytes from global src to shared dst, both 16-byte aligned.
__device__ __forceinline__ void copy16_async(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(
                   static_cast<unsigned>(__cvta_generic_to_shared(dst))),
               "l"(src)
               : "memory");
}

// Waits for all of this thread's copies.
__device__ __forceinline__ void wait_async_copies() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// Whether p (a generic address) points to global memory, the only source copy16_async takes.
__device__ __forceinline__ bool is_global(const void* p) { return __isGlobal(p) != 0; }

}  // namespace mt::cuda
