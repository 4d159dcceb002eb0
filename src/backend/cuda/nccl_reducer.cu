// NCCL sums of gradient accumulators (see nccl_reducer.h).
#include "backend/cuda/nccl_reducer.h"

#include <nccl.h>

#include <algorithm>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "dist/check.h"

#define MT_CHECK_NCCL(call)                                                                            \
  do {                                                                                                 \
    const ncclResult_t mt_nc_ = (call);                                                                \
    if (mt_nc_ != ncclSuccess)                                                                         \
      throw ::mt::Error(MT_FORMAT("NCCL error at {}:{}: `{}`: {}", __FILE__, __LINE__, #call,        \
                                    ncclGetErrorString(mt_nc_)));                                     \
  } while (0)

namespace mt {
namespace {

class NcclReducer final : public GradientReducer {
 public:
  NcclReducer(Backend& backend, MPI_Comm comm) : stream_(cuda_compute_stream(backend)) {
    int rank = 0, size = 0;
    MT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    MT_CHECK_MPI(MPI_Comm_size(comm, &size));
    ncclUniqueId id{};
    if (rank == 0) MT_CHECK_NCCL(ncclGetUniqueId(&id));
    MT_CHECK_MPI(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm));
    MT_CHECK_NCCL(ncclCommInitRank(&comm_, size, id, rank));
  }
  ~NcclReducer() override {
    cudaStreamSynchronize(stream_);
    ncclCommDestroy(comm_);
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
