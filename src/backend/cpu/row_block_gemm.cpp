// Row-blocked sgemm (see row_block_gemm.h).
#include "backend/cpu/row_block_gemm.h"

#include <cblas.h>

#include <algorithm>

#include "backend/cpu/cpu_util.h"

namespace mt::cpu {

void sgemm_row_blocks(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                      const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  constexpr int64_t rows = 64;
  const int64_t n_blocks = (M + rows - 1) / rows;
#pragma omp parallel for schedule(static)
  for (int64_t mb = 0; mb < n_blocks; ++mb) {
    const int64_t m0 = mb * rows, m = std::min(rows, M - m0);
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, blas_int(m),
                blas_int(N), blas_int(K), 1.f, trans_a ? A + m0 : A + m0 * lda, blas_int(lda), B, blas_int(ldb), beta,
                C + m0 * ldc, blas_int(ldc));
  }
}

}  // namespace mt::cpu
