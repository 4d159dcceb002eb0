// CudaResidentRegions: the CUDA implementation of optim/resident_regions.h. For each of the store's leading
// `count` regions, GPU memory holds its fp32 master, Adam m and v, its final gradient and (bf16 compute) the bf16
// weights the layers read: 16 B per parameter, 18 with the copy (plan/resident_plan.h sizes them). Updates run on
// their own stream; the engine's weight stream reads the weights through weights() and the gradient sink leaves the
// gradient in gradient(); write_back() copies the state into the store (and the destructor, last).
// Invariants: loaded from the store at construction; the compute stream reads a region's weights only after the
// update of the store version it requires (a host wait until that update has been enqueued, then a stream wait on
// its event); the node has one rank (no other rank's slices to update).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "kernels/runtime/host_registration.h"
#include "optim/resident_regions.h"
#include "store/host_store.h"

namespace mt {

class CudaResidentRegions final : public ResidentRegions {
 public:
  // backend from make_cuda_backend; registers itself with the store (set_resident) for its lifetime.
  CudaResidentRegions(Backend& backend, HostStore& store, int64_t count);
  ~CudaResidentRegions() override;
  CudaResidentRegions(const CudaResidentRegions&) = delete;
  CudaResidentRegions& operator=(const CudaResidentRegions&) = delete;

  int64_t count() const override { return static_cast<int64_t>(regions_.size()); }
  void update(int64_t r, const AdamWStep& hp, bool skipped, int64_t version) override;
  void write_back() override;

  // Region r's weights in the backend's dtype, at the store's required version, with `compute` ordered after the
  // update that made them.
  const void* weights(int64_t r, cudaStream_t compute);
  // Region r's gradient; with `compute` ordered after the update that read it last, when written there.
  float* gradient(int64_t r) { return regions_[static_cast<size_t>(r)].grad; }
  float* gradient(int64_t r, cudaStream_t compute) {
    order_after_update(r, compute);
    return gradient(r);
  }

 private:
  void order_after_update(int64_t r, cudaStream_t s);
  struct Region {
    float *master = nullptr, *exp_avg = nullptr, *exp_avg_sq = nullptr, *grad = nullptr;
    __nv_bfloat16* weights = nullptr;  // bf16 compute only
    cudaEvent_t updated = nullptr;     // after the last update (or the load)
    std::vector<DecayRun> runs;        // its slots as runs that decay alike: one update kernel each
  };
  Backend& backend_;
  HostStore& store_;
  std::vector<Region> regions_;
  std::vector<bool> stale_;         // per region: updated since the store's copy was last written back
  std::vector<int64_t> enqueued_;  // per region: the store version whose update is enqueued (dist/shared_flags.h)
  cudaStream_t update_ = nullptr;
  HostRegistration registration_;
};

}  // namespace mt
