// Dense layer y = x·wᵀ + b and its backward, on OpenBLAS GEMMs (row-major, w stored [O, I] as in PyTorch).
// Invariant: dw and db accumulate (beta = 1); dx overwrites unless accumulate_dx; db column sums run in row order;
// every product's sums run in one order whatever the OpenMP thread count.
#include <algorithm>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"
#include "backend/cpu/row_block_gemm.h"

namespace mt::cpu {

void linear_forward(real* y, const real* x, const real* w, const real* b, int64_t T, int64_t I, int64_t O) {
  MT_ASSERT(T >= 0 && I > 0 && O > 0);
  if (T == 0) return;
  if (b != nullptr) {
#pragma omp parallel for if (T * O > parallel_min_elems) schedule(static)
    for (int64_t t = 0; t < T; ++t) std::copy(b, b + O, y + t * O);
  }
  gemm_row_blocks(false, true, T, O, I, 1.f, x, I, w, I, b != nullptr ? 1.f : 0.f, y, O);
}

// db[O] += scale·Σ_t dy[t, :], parallel over column blocks so each db element has one writer.
static void column_sums_accumulate(real* db, const real* dy, int64_t T, int64_t O, real scale) {
  constexpr int64_t block = 256;
  const int64_t n_blocks = (O + block - 1) / block;
#pragma omp parallel for if (T * O > parallel_min_elems) schedule(static)
  for (int64_t cb = 0; cb < n_blocks; ++cb) {
    const int64_t o0 = cb * block, o1 = std::min(O, o0 + block);
    double acc[block] = {};
    for (int64_t t = 0; t < T; ++t) {
      const real* row = dy + t * O;
      for (int64_t o = o0; o < o1; ++o) acc[o - o0] += row[o];
    }
    for (int64_t o = o0; o < o1; ++o) db[o] += static_cast<real>(scale * acc[o - o0]);
  }
}

void linear_backward(real* dx, real* dw, real* db, const real* dy, const real* x, const real* w, int64_t T,
                     int64_t I, int64_t O, bool accumulate_dx, real dy_scale) {
  MT_ASSERT(T >= 0 && I > 0 && O > 0);
  if (T == 0) return;
  if (dx != nullptr) {
    gemm_row_blocks(false, false, T, I, O, dy_scale, dy, O, w, I, accumulate_dx ? 1.f : 0.f, dx, I);
  }
  if (dw != nullptr) gemm_row_blocks(true, false, O, I, T, dy_scale, dy, O, x, I, 1.f, dw, I);  // dw += s·dyᵀ·x
  if (db != nullptr) column_sums_accumulate(db, dy, T, O, dy_scale);
}

}  // namespace mt::cpu
