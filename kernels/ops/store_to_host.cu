// A small device → host copy written by one block's stores into mapped page-locked host memory, not by a copy engine:
// a download of a few bytes (an MoE layer's expert offsets) never queues behind the copy engines' bulk transfers
// (the weight and gradient streams). Invariant: ordered on the stream like a kernel; the host may read the bytes once
// the stream has been synchronised.
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int threads = 256;

template <typename W>
__global__ void store_to_host_kernel(W* __restrict__ host, const W* __restrict__ src, int64_t n) {
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) host[i] = src[i];
}

}  // namespace

void store_to_host(void* host_mapped, const void* src, int64_t bytes, cudaStream_t s) {
  MT_ASSERT(bytes >= 0, "store_to_host: bytes {}", bytes);
  if (bytes == 0) return;
  if (bytes % 4 == 0 && is_aligned(host_mapped, 4) && is_aligned(src, 4))
    store_to_host_kernel<uint32_t><<<1, threads, 0, s>>>(static_cast<uint32_t*>(host_mapped),
                                                        static_cast<const uint32_t*>(src), bytes / 4);
  else
    store_to_host_kernel<uint8_t><<<1, threads, 0, s>>>(static_cast<uint8_t*>(host_mapped),
                                                       static_cast<const uint8_t*>(src), bytes);
  MT_CHECK_LAUNCH("store_to_host", "bytes={}", bytes);
}

}  // namespace mt::cuda
