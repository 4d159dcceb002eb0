// The CUDA device's rates for the plan (backend/backend.h DeviceRates): cuBLASLt's bf16 GEMM on a layer-sized
// problem and page-locked copies each way, timed with events on the backend's compute stream.
// Invariant: the probe allocates its own buffers (device and page-locked host memory, freed before it returns), runs
// one warm-up of each part before its timed repetitions, and leaves the stream idle; it takes well under a second.
#pragma once
#include <cuda_runtime.h>

#include "backend/backend.h"
#include "kernels/runtime/gemm.h"

namespace mt::cuda {

DeviceRates measure_device_rates(cudaStream_t stream, Gemm& gemm);

}  // namespace mt::cuda
