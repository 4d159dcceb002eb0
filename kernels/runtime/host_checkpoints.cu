// CudaHostCheckpoints (see host_checkpoints.h).
#include "kernels/runtime/host_checkpoints.h"

#include <vector>

#include "kernels/runtime/cuda_backend.h"
#include "kernels/ops/cuda_check.h"
#include "core/error.h"

namespace mt {
namespace {

class CudaHostCheckpoints final : public CheckpointStore {
 public:
  explicit CudaHostCheckpoints(Backend& backend) : backend_(backend), compute_(cuda_compute_stream(backend)) {
    MT_CHECK_CUDA(cudaStreamCreateWithFlags(&copies_, cudaStreamNonBlocking));
    for (Staging& s : staging_) {
      MT_CHECK_CUDA(cudaEventCreateWithFlags(&s.used, cudaEventDisableTiming));
      MT_CHECK_CUDA(cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming));
    }
  }
  ~CudaHostCheckpoints() override {
    cudaStreamSynchronize(copies_);
    cudaStreamSynchronize(compute_);
    release_memory();
    for (Staging& s : staging_) {
      cudaEventDestroy(s.used);
      cudaEventDestroy(s.copied);
    }
    cudaStreamDestroy(copies_);
  }
  CudaHostCheckpoints(const CudaHostCheckpoints&) = delete;
  CudaHostCheckpoints& operator=(const CudaHostCheckpoints&) = delete;

  void reserve(int64_t count, int64_t bytes) override {
    if (static_cast<int64_t>(slots_.size()) >= count && bytes_ >= bytes) return;
    MT_CHECK_CUDA(cudaStreamSynchronize(copies_));
    MT_CHECK_CUDA(cudaStreamSynchronize(compute_));
    release_memory();
    for (Staging& s : staging_) s.data = backend_.alloc_bytes(bytes);
    for (int64_t k = 0; k < count; ++k) {
      void* p = nullptr;
      const cudaError_t err = cudaHostAlloc(&p, static_cast<size_t>(bytes), cudaHostAllocDefault);
      MT_REQUIRE(err == cudaSuccess,
                 "cannot allocate {:.2f} GiB of page-locked host memory for activation checkpoint {} of {} "
                 "(training.activation_checkpoints host): {}", static_cast<double>(bytes) / 1073741824.0, k, count,
                 cudaGetErrorString(err));
      slots_.push_back(p);
    }
    written_.assign(static_cast<size_t>(count), 0);
    bytes_ = bytes;
  }

  void* begin_write(int64_t k, int64_t bytes) override {
    MT_ASSERT(k >= 0 && k < static_cast<int64_t>(slots_.size()) && bytes <= bytes_,
              "checkpoint {} of {} bytes beyond the {} of {} reserved", k, bytes, slots_.size(), bytes_);
    Staging& s = of(k);
    if (s.copy_recorded) MT_CHECK_CUDA(cudaStreamWaitEvent(compute_, s.copied, 0));  // its last copy has finished
    s.held = -1;
    written_[static_cast<size_t>(k)] = bytes;
    return s.data;
  }

  void end_write(int64_t k) override {
    Staging& s = of(k);
    const int64_t bytes = written_[static_cast<size_t>(k)];
    MT_CHECK_CUDA(cudaEventRecord(s.used, compute_));
    MT_CHECK_CUDA(cudaStreamWaitEvent(copies_, s.used, 0));
    MT_CHECK_CUDA(cudaMemcpyAsync(slots_[static_cast<size_t>(k)], s.data, static_cast<size_t>(bytes),
                                  cudaMemcpyDeviceToHost, copies_));
    MT_CHECK_CUDA(cudaEventRecord(s.copied, copies_));
    s.copy_recorded = true;
    s.copied_in = false;
    s.held = k;
    bytes_moved_ += bytes;
  }

  void* acquire(int64_t k) override {
    MT_ASSERT(k >= 0 && k < static_cast<int64_t>(slots_.size()), "checkpoint {} beyond the {} reserved", k,
              slots_.size());
    Staging& s = of(k);
    if (s.held != k) copy_in(k);  // not prefetched (only where the backward's order was not descending)
    if (s.copied_in) MT_CHECK_CUDA(cudaStreamWaitEvent(compute_, s.copied, 0));  // a copy out only reads it
    if (k > 0 && of(k - 1).held != k - 1) copy_in(k - 1);  // the next one, while this segment runs
    return s.data;
  }

  void release(int64_t k) override { MT_CHECK_CUDA(cudaEventRecord(of(k).used, compute_)); }

  int64_t bytes_moved() const override { return bytes_moved_; }

 private:
  struct Staging {
    void* data = nullptr;
    int64_t held = -1;             // the checkpoint it holds, or is being copied into it (-1: none)
    cudaEvent_t used = nullptr;    // compute's last use of it (end_write, release)
    cudaEvent_t copied = nullptr;  // the copy stream's last copy out of or into it
    bool copy_recorded = false;
    bool copied_in = false;        // that copy wrote it (compute must wait before reading)
  };
  Staging& of(int64_t k) { return staging_[static_cast<size_t>(k % kCheckpointStagingBuffers)]; }

  // Checkpoint k from its slot into its staging buffer, after compute's last use of that buffer.
  void copy_in(int64_t k) {
    Staging& s = of(k);
    const int64_t bytes = written_[static_cast<size_t>(k)];
    MT_CHECK_CUDA(cudaEventRecord(s.used, compute_));
    MT_CHECK_CUDA(cudaStreamWaitEvent(copies_, s.used, 0));
    MT_CHECK_CUDA(cudaMemcpyAsync(s.data, slots_[static_cast<size_t>(k)], static_cast<size_t>(bytes),
                                  cudaMemcpyHostToDevice, copies_));
    MT_CHECK_CUDA(cudaEventRecord(s.copied, copies_));
    s.copy_recorded = s.copied_in = true;
    s.held = k;
    bytes_moved_ += bytes;
  }

  void release_memory() {
    for (void* p : slots_) cudaFreeHost(p);
    slots_.clear();
    for (Staging& s : staging_) {
      if (s.data) backend_.free_bytes(s.data);
      s.data = nullptr;
      s.held = -1;
      s.copy_recorded = s.copied_in = false;
    }
  }

  Backend& backend_;
  cudaStream_t compute_;
  cudaStream_t copies_ = nullptr;
  Staging staging_[kCheckpointStagingBuffers];
  std::vector<void*> slots_;       // page-locked host memory, one per checkpoint
  std::vector<int64_t> written_;   // bytes of each slot the forward wrote
  int64_t bytes_ = 0, bytes_moved_ = 0;
};

}  // namespace

std::unique_ptr<CheckpointStore> make_cuda_host_checkpoints(Backend& backend) {
  return std::make_unique<CudaHostCheckpoints>(backend);
}

}  // namespace mt
