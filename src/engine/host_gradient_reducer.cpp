// MPI sums of gradient accumulators (see host_gradient_reducer.h).
#include "engine/host_gradient_reducer.h"

#include <algorithm>

#include "dist/check.h"

namespace mt {

void HostGradientReducer::all_reduce(float* data, int64_t n) {
  float* host = data;
  if (!backend_.host_memory()) {
    staging_.resize(static_cast<size_t>(n));
    backend_.download(staging_.data(), data, n * 4);  // waits for the ops that wrote the accumulator
    host = staging_.data();
  }
  constexpr int64_t kChunk = int64_t{1} << 30;
  for (int64_t at = 0; at < n; at += kChunk)
    MT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, host + at, static_cast<int>(std::min(kChunk, n - at)), MPI_FLOAT, MPI_SUM,
                               comm_));
  if (!backend_.host_memory()) backend_.upload(data, host, n * 4);
}

}  // namespace mt
