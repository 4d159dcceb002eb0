// gemm_row_blocks: row-major C[M, N] = alpha·op(A)·op(B) + beta·C on OpenBLAS (sgemm, dgemm in the fp64 build) in blocks of
// C's rows fixed by the shape, each a single-threaded GEMM inside one parallel loop.
// Invariant: every element's sum runs in one order for any OpenMP thread count. OpenBLAS alone splits a product's
// inner sum over its threads for some shapes (a projection to a few heads, dx over a few hundred outputs), which
// would make the CPU backend's results depend on the thread count, and data parallelism splits the threads over ranks.
#pragma once
#include <cstdint>

#include "core/real.h"

namespace mt::cpu {

void gemm_row_blocks(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, real alpha, const real* A, int64_t lda,
                     const real* B, int64_t ldb, real beta, real* C, int64_t ldc);

}  // namespace mt::cpu
