// Row-blocked GEMM (see row_block_gemm.h).
#include "backend/cpu/row_block_gemm.h"

#include <cblas.h>

#include <algorithm>

#include "backend/cpu/cpu_util.h"

namespace mt::cpu {
namespace {

// Row-major C = alpha·op(A)·op(B) + beta·C through the BLAS routine of the element type.
[[maybe_unused]] void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha,
                                const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
[[maybe_unused]] void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, double alpha,
                                const double* A, int lda, const double* B, int ldb, double beta, double* C, int ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace

void gemm_row_blocks(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, real alpha, const real* A, int64_t lda,
                     const real* B, int64_t ldb, real beta, real* C, int64_t ldc) {
  constexpr int64_t rows = 64;
  const int64_t n_blocks = (M + rows - 1) / rows;
#pragma omp parallel for schedule(static)
  for (int64_t mb = 0; mb < n_blocks; ++mb) {
    const int64_t m0 = mb * rows, m = std::min(rows, M - m0);
    blas_gemm(trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, blas_int(m), blas_int(N),
              blas_int(K), alpha, trans_a ? A + m0 : A + m0 * lda, blas_int(lda), B, blas_int(ldb), beta, C + m0 * ldc,
              blas_int(ldc));
  }
}

}  // namespace mt::cpu
