// Token embedding lookup y[t] = table[ids[t]] and its scatter-add backward.
// Invariant: backward splits the hidden dim across threads and walks tokens in order, so repeated ids never race
// and the sum order is fixed.
#include <algorithm>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"

namespace mt::cpu {

void embedding_forward(real* y, const real* table, const int32_t* ids, int64_t T, int64_t H) {
  MT_ASSERT(T >= 0 && H > 0);
#pragma omp parallel for if (T * H > parallel_min_elems) schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    const real* row = table + static_cast<int64_t>(ids[t]) * H;
    std::copy(row, row + H, y + t * H);
  }
}

void embedding_backward(real* dtable, const real* dy, const int32_t* ids, int64_t T, int64_t H) {
  MT_ASSERT(T >= 0 && H > 0);
  constexpr int64_t block = 256;
  const int64_t n_blocks = (H + block - 1) / block;
#pragma omp parallel for if (T * H > parallel_min_elems) schedule(static)
  for (int64_t cb = 0; cb < n_blocks; ++cb) {
    const int64_t h0 = cb * block, len = std::min(H, h0 + block) - h0;
    for (int64_t t = 0; t < T; ++t) {
      axpy(dtable + static_cast<int64_t>(ids[t]) * H + h0, 1.f, dy + t * H + h0, len);
    }
  }
}

}  // namespace mt::cpu
