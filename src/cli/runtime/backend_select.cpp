// Backend choice (see backend_select.h).
#include "cli/runtime/backend_select.h"

#include <algorithm>

#include "core/error.h"
#include "core/runtime_switches.h"
#include "engine/checkpoint_store.h"
#include "engine/gradient_reducer.h"
#include "engine/host_gradient_reducer.h"
#include "engine/weight_stream.h"
#ifdef MEGATRAIN_HAVE_CUDA
#include "kernels/runtime/cuda_backend.h"
#include "kernels/runtime/host_checkpoints.h"
#include "kernels/runtime/pipeline.h"
#endif
#ifdef MEGATRAIN_HAVE_NCCL
#include "kernels/runtime/nccl_reducer.h"
#endif

namespace mt {

std::unique_ptr<Backend> select_backend(DType dtype, int device, const RuntimeSwitches& switches) {
  const BackendChoice wanted = switches.backend;
  if (wanted == BackendChoice::cpu) return make_cpu_backend();
#ifdef MEGATRAIN_HAVE_CUDA
  if (wanted == BackendChoice::cuda || cuda_device_count() > 0) return make_cuda_backend(dtype, device, switches);
#else
  (void)device;
  MT_REQUIRE(wanted != BackendChoice::cuda,
             "MEGATRAIN_BACKEND=cuda: this build has no CUDA backend (nvcc was not found)");
#endif
  return make_cpu_backend();
}

int visible_gpus() {
  if (environment_switches().backend == BackendChoice::cpu) return 0;
#ifdef MEGATRAIN_HAVE_CUDA
  return cuda_device_count();
#else
  return 0;
#endif
}

std::vector<int> visible_gpu_numa_nodes() {
  if (visible_gpus() == 0) return {};
#ifdef MEGATRAIN_HAVE_CUDA
  return cuda_device_numa_nodes();
#else
  return {};
#endif
}

UpdatePasses update_passes() { return visible_gpus() > 0 ? UpdatePasses::split : UpdatePasses::fused; }

int gpus_per_node(int64_t requested) {
  if (requested > 0) return static_cast<int>(requested);
  return std::clamp(visible_gpus(), 1, dist::context().node_size);
}

EngineTransfers make_engine_transfers(Backend& backend, HostStore& store, int64_t slots,
                                      const dist::DataParallel& dp, DType weights,
                                      CheckpointPlacement checkpoints, int64_t resident_regions) {
  EngineTransfers t;
  MT_ASSERT(resident_regions == 0 || (!backend.host_memory() && dp.size <= 1),
            "GPU-resident optimizer state needs the CUDA backend and one GPU rank");
#ifdef MEGATRAIN_HAVE_CUDA
  if (!backend.host_memory()) t = make_cuda_pipeline(backend, store, slots, resident_regions);
  if (!backend.host_memory() && checkpoints == CheckpointPlacement::host) t.checkpoints = make_cuda_host_checkpoints(backend);
#endif
  if (!t.checkpoints) t.checkpoints = make_checkpoint_store(backend, checkpoints);
  if (!t.weights) t.weights = std::make_unique<BasicWeightStream>(backend, store, slots, weights);
  if (dp.size <= 1) return t;
  std::unique_ptr<GradientReducer> reducer;
#ifdef MEGATRAIN_HAVE_NCCL
  if (!backend.host_memory()) reducer = make_nccl_reducer(backend, dp.comm);
#endif
  if (!reducer) reducer = std::make_unique<HostGradientReducer>(backend, dp.comm);
  if (!t.grads) t.grads = std::make_unique<BasicGradientSink>(backend, store);
  t.grads = std::make_unique<ReducingGradientSink>(std::move(t.grads), std::move(reducer), store, dp.leads_node());
  return t;
}

}  // namespace mt
