// The CUDA device's rates (see rate_probe.h).
#include "kernels/runtime/rate_probe.h"

#include <cstdint>

#include "kernels/ops/cuda_check.h"

namespace mt::cuda {
namespace {

// A layer's GEMM at a step's tokens: 8192 tokens through a 4096 → 14336 projection (a 7-8 B model's MLP), 0.96
// TFLOP a call, about 1.3 ms on an H100.
constexpr int64_t kGemmM = 8192, kGemmN = 14336, kGemmK = 4096;
constexpr int kGemmRepetitions = 5;
// 256 MiB each way, three times: about 15 ms a direction at 55 GB/s.
constexpr int64_t kCopyBytes = int64_t{256} << 20;
constexpr int kCopyRepetitions = 3;

// Seconds `work` takes on the stream, over `repetitions` calls after one warm-up call.
template <typename Work>
double timed(cudaStream_t stream, int repetitions, Work&& work) {
  work();
  cudaEvent_t start = nullptr, stop = nullptr;
  MT_CHECK_CUDA(cudaEventCreate(&start));
  MT_CHECK_CUDA(cudaEventCreate(&stop));
  MT_CHECK_CUDA(cudaEventRecord(start, stream));
  for (int i = 0; i < repetitions; ++i) work();
  MT_CHECK_CUDA(cudaEventRecord(stop, stream));
  MT_CHECK_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  MT_CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  MT_CHECK_CUDA(cudaEventDestroy(start));
  MT_CHECK_CUDA(cudaEventDestroy(stop));
  return static_cast<double>(ms) * 1e-3;
}

// Device memory freed at scope exit.
struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(int64_t bytes) { MT_CHECK_CUDA(cudaMalloc(&p, static_cast<size_t>(bytes))); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

}  // namespace

DeviceRates measure_device_rates(cudaStream_t stream, Gemm& gemm) {
  DeviceRates r;
  {
    DeviceBuffer a(kGemmM * kGemmK * 2), b(kGemmN * kGemmK * 2), c(kGemmM * kGemmN * 2);
    // Every bf16 element 0x3C3C (about 0.0115): finite, nonzero operands.
    MT_CHECK_CUDA(cudaMemsetAsync(a.p, 0x3C, static_cast<size_t>(kGemmM * kGemmK * 2), stream));
    MT_CHECK_CUDA(cudaMemsetAsync(b.p, 0x3C, static_cast<size_t>(kGemmN * kGemmK * 2), stream));
    const double seconds = timed(stream, kGemmRepetitions, [&] {
      gemm.run(c.p, DType::bf16, a.p, b.p, DType::bf16, true, kGemmM, kGemmN, kGemmK, 1.0f, 0.0f);
    });
    r.gemm_flops = 2.0 * static_cast<double>(kGemmM * kGemmN) * static_cast<double>(kGemmK) * kGemmRepetitions /
                   seconds;
  }
  void* host = nullptr;
  MT_CHECK_CUDA(cudaHostAlloc(&host, static_cast<size_t>(kCopyBytes), cudaHostAllocDefault));
  try {
    DeviceBuffer device_copy(kCopyBytes);
    const auto bytes = static_cast<size_t>(kCopyBytes);
    const double total = static_cast<double>(kCopyBytes) * kCopyRepetitions;
    r.h2d_bytes = total / timed(stream, kCopyRepetitions, [&] {
                    MT_CHECK_CUDA(cudaMemcpyAsync(device_copy.p, host, bytes, cudaMemcpyHostToDevice, stream));
                  });
    r.d2h_bytes = total / timed(stream, kCopyRepetitions, [&] {
                    MT_CHECK_CUDA(cudaMemcpyAsync(host, device_copy.p, bytes, cudaMemcpyDeviceToHost, stream));
                  });
  } catch (...) {
    cudaFreeHost(host);
    throw;
  }
  MT_CHECK_CUDA(cudaFreeHost(host));
  return r;
}

}  // namespace mt::cuda
