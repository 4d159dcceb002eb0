// NCCL sums of gradient accumulators (see nccl_reducer.h).
#include "kernels/runtime/nccl_reducer.h"

#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/runtime/cuda_backend.h"
#include "kernels/ops/cuda_check.h"
#include "core/error.h"
#include "dist/check.h"

// The NCCL member of the check macro family (src/core/check.h).
#define MT_CHECK_NCCL(call) MT_CHECK_CALL(throw_error, "NCCL", call, mt_rc_ == ncclSuccess, ncclGetErrorString(mt_rc_))

namespace mt {
namespace {

class NcclReducer final : public GradientReducer {
 public:
  NcclReducer(Backend& backend, MPI_Comm comm) : stream_(cuda_compute_stream(backend)) {
    int rank = 0, size = 0;
    MT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    MT_CHECK_MPI(MPI_Comm_size(comm, &size));
    refuse_shared_gpus(comm, rank, size);
    ncclUniqueId id{};
    if (rank == 0) MT_CHECK_NCCL(ncclGetUniqueId(&id));
    MT_CHECK_MPI(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm));
    MT_CHECK_NCCL(ncclCommInitRank(&comm_, size, id, rank));
  }
  ~NcclReducer() override {
    cudaStreamSynchronize(stream_);
    ncclCommDestroy(comm_);
  }

  // NCCL cannot put two ranks on one GPU; say so in terms of the launch.
  static void refuse_shared_gpus(MPI_Comm comm, int rank, int size) {
    int device = 0;
    MT_CHECK_CUDA(cudaGetDevice(&device));
    cudaDeviceProp prop{};
    MT_CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
    std::vector<cudaUUID_t> all(static_cast<size_t>(size));
    MT_CHECK_MPI(MPI_Allgather(&prop.uuid, sizeof(cudaUUID_t), MPI_BYTE, all.data(), sizeof(cudaUUID_t), MPI_BYTE, comm));
    for (int other = 0; other < size; ++other)
      MT_REQUIRE(other == rank || std::memcmp(&all[static_cast<size_t>(other)], &prop.uuid, sizeof(cudaUUID_t)) != 0,
                 "data-parallel GPU ranks {} and {} drive the same GPU (device {}, {}): give every GPU rank its own GPU "
                 "(training.gpus_per_node at most the GPUs each node shows, or srun --gpus-per-task=1)",
                 std::min(rank, other), std::max(rank, other), device, prop.name);
  }

  void all_reduce(float* data, int64_t n) override {
    MT_CHECK_NCCL(ncclAllReduce(data, data, static_cast<size_t>(n), ncclFloat32, ncclSum, comm_, stream_));
  }

 private:
  cudaStream_t stream_;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

std::unique_ptr<GradientReducer> make_nccl_reducer(Backend& backend, MPI_Comm comm) {
  return std::make_unique<NcclReducer>(backend, comm);
}

}  // namespace mt
