// Backend choice (see backend_select.h).
#include "cli/train/backend_select.h"

#include <cstdlib>
#include <string>

#include "core/error.h"
#ifdef MEGATRAIN_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/pipeline.h"
#endif

namespace mt {

std::unique_ptr<Backend> select_backend(DType dtype) {
  const char* env = std::getenv("MEGATRAIN_BACKEND");
  const std::string wanted = env ? env : "";
  MT_REQUIRE(wanted.empty() || wanted == "cpu" || wanted == "cuda",
             "MEGATRAIN_BACKEND='{}': expected cpu or cuda", wanted);
  if (wanted == "cpu") return make_cpu_backend();
#ifdef MEGATRAIN_HAVE_CUDA
  if (wanted == "cuda" || cuda_device_count() > 0) return make_cuda_backend(dtype);
#else
  MT_REQUIRE(wanted != "cuda", "MEGATRAIN_BACKEND=cuda: this build has no CUDA backend (nvcc was not found)");
#endif
  return make_cpu_backend();
}

EngineTransfers make_engine_transfers(Backend& backend, HostStore& store, int64_t slots) {
#ifdef MEGATRAIN_HAVE_CUDA
  if (!backend.host_memory()) return make_cuda_pipeline(backend, store, slots);
#endif
  (void)store;
  (void)slots;
  return {};
}

}  // namespace mt
