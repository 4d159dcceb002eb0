// The CUDA backend: mt::Backend on one GPU. Ops run on one compute stream (kernels/ launchers and
// cuBLASLt); memory is device memory. Invariant: no op synchronises the device except download(),
// head_loss() (it returns the loss value) and synchronize().
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "core/runtime_switches.h"

namespace mt {

// Number of CUDA devices visible (0 when there is no driver or no GPU); never throws.
int cuda_device_count();
// The NUMA node each visible device hangs off (from its PCI bus id in sysfs; -1 where unknown); never throws.
std::vector<int> cuda_device_numa_nodes();

// dtype: activations and streamed weights (bfloat16 or float32); switches: the run's (core/runtime_switches.h), which
// pick its attention, expert GEMM and delta-rule kernels and its op profiling. Throws mt::Error if no GPU is usable.
std::unique_ptr<Backend> make_cuda_backend(DType dtype, int device, const RuntimeSwitches& switches);

// The compute stream of a backend made by make_cuda_backend (for the pipeline's events).
cudaStream_t cuda_compute_stream(Backend& backend);

}  // namespace mt
