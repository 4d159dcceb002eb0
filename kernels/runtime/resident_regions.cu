// GPU-resident regions (see resident_regions.h).
#include "kernels/runtime/resident_regions.h"

#include <cstdio>

#include "kernels/runtime/cuda_backend.h"
#include "kernels/ops/cuda_check.h"
#include "core/error.h"
#include "dist/shared_flags.h"
#include "kernels/ops/kernels.h"

namespace mt {

CudaResidentRegions::CudaResidentRegions(Backend& backend, HostStore& store, int64_t count)
    : backend_(backend), store_(store), regions_(static_cast<size_t>(count)),
      stale_(static_cast<size_t>(count), false), enqueued_(static_cast<size_t>(count), 0) {
  MT_REQUIRE(store.ranks() == 1, "GPU-resident optimizer state needs one rank on the node (got {})", store.ranks());
  MT_REQUIRE(store.offload() == OffloadMode::none, "GPU-resident optimizer state cannot combine with store.offload");
  MT_ASSERT(count > 0 && count <= store.num_regions(), "resident regions {} of {}", count, store.num_regions());
  MT_CHECK_CUDA(cudaStreamCreateWithFlags(&update_, cudaStreamNonBlocking));
  const bool bf16 = backend_.dtype() == DType::bf16;
  for (int64_t r = 0; r < count; ++r) {
    Region& d = regions_[static_cast<size_t>(r)];
    d.runs = decay_runs(store_.layout().regions[static_cast<size_t>(r)]);
    const int64_t n = store_.numel(r), bytes = n * 4;
    for (float** p : {&d.master, &d.exp_avg, &d.exp_avg_sq, &d.grad}) *p = static_cast<float*>(backend_.alloc_bytes(bytes));
    registration_.add(store_.master(r), bytes);
    registration_.add(store_.exp_avg(r), bytes);
    registration_.add(store_.exp_avg_sq(r), bytes);
    registration_.add(store_.stream_bf16(r), store_.stream_bf16(r) ? n * 2 : 0);
    MT_CHECK_CUDA(cudaMemcpyAsync(d.master, store_.master(r), bytes, cudaMemcpyHostToDevice, update_));
    MT_CHECK_CUDA(cudaMemcpyAsync(d.exp_avg, store_.exp_avg(r), bytes, cudaMemcpyHostToDevice, update_));
    MT_CHECK_CUDA(cudaMemcpyAsync(d.exp_avg_sq, store_.exp_avg_sq(r), bytes, cudaMemcpyHostToDevice, update_));
    if (bf16) {
      d.weights = static_cast<__nv_bfloat16*>(backend_.alloc_bytes(n * 2));
      cuda::cast(d.weights, d.master, n, update_);
    }
    MT_CHECK_CUDA(cudaEventCreateWithFlags(&d.updated, cudaEventDisableTiming));
    MT_CHECK_CUDA(cudaEventRecord(d.updated, update_));
    enqueued_[static_cast<size_t>(r)] = store_.required_version();
  }
  MT_CHECK_CUDA(cudaStreamSynchronize(update_));
  store_.set_resident(this);
}

CudaResidentRegions::~CudaResidentRegions() {
  // An update handed out to the optimizer has been enqueued (published) before the state goes back and the buffers go.
  for (int64_t r = 0; r < count(); ++r) store_.wait_region(r);
  store_.set_resident(nullptr);
  try {
    write_back();
  } catch (const std::exception& e) {  // unwinding from a CUDA error: the store keeps its last written-back state
    std::fprintf(stderr, "megatrain: warning: GPU-resident optimizer state not written back: %s\n", e.what());
  }
  for (Region& d : regions_) {
    for (void* p : {static_cast<void*>(d.master), static_cast<void*>(d.exp_avg), static_cast<void*>(d.exp_avg_sq),
                    static_cast<void*>(d.grad), static_cast<void*>(d.weights)})
      if (p) backend_.free_bytes(p);
    if (d.updated) cudaEventDestroy(d.updated);
  }
  cudaStreamDestroy(update_);
}

void CudaResidentRegions::update(int64_t r, const AdamWStep& hp, bool skipped, int64_t version) {
  Region& d = regions_[static_cast<size_t>(r)];
  if (!skipped) {
    for (const DecayRun& run : d.runs) {
      const int64_t o = run.begin;
      cuda::adamw_update(d.master + o, d.exp_avg + o, d.exp_avg_sq + o, d.grad + o, d.weights ? d.weights + o : nullptr,
                         run.end - run.begin, adamw_coefficients(hp, run.weight_decay), update_);
    }
    MT_CHECK_CUDA(cudaEventRecord(d.updated, update_));
    stale_[static_cast<size_t>(r)] = true;
  }
  dist::store_release(enqueued_[static_cast<size_t>(r)], version);
}

// The state of every region updated since the last write-back, after its update, into the store (the optimizer is
// idle: no update is in flight on the host side).
void CudaResidentRegions::write_back() {
  for (int64_t r = 0; r < count(); ++r) {
    if (!stale_[static_cast<size_t>(r)]) continue;
    Region& d = regions_[static_cast<size_t>(r)];
    const auto bytes = static_cast<size_t>(store_.numel(r) * 4);
    MT_CHECK_CUDA(cudaMemcpyAsync(store_.master(r), d.master, bytes, cudaMemcpyDeviceToHost, update_));
    MT_CHECK_CUDA(cudaMemcpyAsync(store_.exp_avg(r), d.exp_avg, bytes, cudaMemcpyDeviceToHost, update_));
    MT_CHECK_CUDA(cudaMemcpyAsync(store_.exp_avg_sq(r), d.exp_avg_sq, bytes, cudaMemcpyDeviceToHost, update_));
    if (std::uint16_t* copy = store_.stream_bf16(r))
      MT_CHECK_CUDA(cudaMemcpyAsync(copy, d.weights, bytes / 2, cudaMemcpyDeviceToHost, update_));
    stale_[static_cast<size_t>(r)] = false;
  }
  MT_CHECK_CUDA(cudaStreamSynchronize(update_));
}

void CudaResidentRegions::order_after_update(int64_t r, cudaStream_t s) {
  const int64_t version = store_.required_version();
  const int64_t& enqueued = enqueued_[static_cast<size_t>(r)];
  dist::wait_until([&] { return dist::load_acquire(enqueued) >= version; });
  MT_CHECK_CUDA(cudaStreamWaitEvent(s, regions_[static_cast<size_t>(r)].updated, 0));
}

const void* CudaResidentRegions::weights(int64_t r, cudaStream_t compute) {
  order_after_update(r, compute);
  const Region& d = regions_[static_cast<size_t>(r)];
  return d.weights ? static_cast<const void*>(d.weights) : static_cast<const void*>(d.master);
}

}  // namespace mt
