// Row-major GEMMs through cuBLASLt for the linear layers and the LM head: bf16 or fp32 operands,
// fp32 accumulation (TF32 off in fp32 mode), outputs in the operand type or fp32.
// Invariant: every call is enqueued on the given stream; plans are cached per shape and operand alignment (the
// heuristic only returns algorithms whose vector loads the pointers allow: rows of an expert's slice may be 16-byte
// aligned only). Calls whose row count varies from call to call (an expert's rows) share the plan of their row count
// rounded up to a power of two, so the cache stays small and the heuristic runs once per bucket, not per call; the
// algorithm of a bucket depends only on the bucket, so results do not depend on call order.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "core/dtype.h"

namespace mt::cuda {

// Elements from one row to the next of a call's row-major A and C (or D) where they are not packed (0: packed, the
// row's length): the LM head's logits rows, padded to an aligned stride.
struct RowStrides {
  int64_t a = 0, c = 0;
};

class Gemm {
 public:
  Gemm(cudaStream_t stream, int64_t workspace_bytes);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Row-major C[M,N] = alpha · A[M,K] · op(B) + beta · C, where op(B) = B[N,K]ᵀ when b_transposed (the
  // "x · wᵀ" of a linear layer) and B[K,N] otherwise. A, B in `ab`; C in `c` (`ab` or f32). rows_vary: M is an
  // expert's row count (plans shared per power-of-two bucket of M).
  void run(void* C, DType c, const void* A, const void* B, DType ab, bool b_transposed, int64_t M, int64_t N,
           int64_t K, float alpha, float beta, bool rows_vary = false, RowStrides ld = {});
  // Row-major D[M,N] = alpha · A[M,K] · B[N,K]ᵀ + R[M,N], all in `ab`, R not aliasing D: a linear layer with its
  // residual (and a residual multiplier) added in the epilogue (the fp32 sum rounds once; no separate pass over D).
  void run_add(void* D, const void* R, const void* A, const void* B, DType ab, int64_t M, int64_t N, int64_t K,
               float alpha);
  // Row-major C[M,N] = alpha · A[K,M]ᵀ · B[K,N] + beta · C: the weight gradient dyᵀ·x, accumulated in fp32 C.
  // rows_vary: K is an expert's row count.
  void run_at_b(float* C, const void* A, const void* B, DType ab, int64_t M, int64_t N, int64_t K, float alpha,
                float beta, bool rows_vary = false, RowStrides ld = {});

 private:
  // One column-major problem: descriptors and the heuristic's algorithm, built on first use.
  struct Plan;
  // d, transA, transB, ab, m, n, k, lda, ldb, ldd, alignment, bucketed (the plan of a row bucket: resized per call).
  using Shape = std::tuple<int, bool, bool, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, bool>;
  Plan& plan_for(const Shape& shape);
  // Which column-major dimension is an expert's row count: its plan is the bucket's, resized per call.
  enum class Varying { none, n, k };
  // D = alpha·op(A)·op(B) + beta·C, column-major; C has D's layout and is D itself where null.
  void matmul(void* D, const void* C, DType d, const void* colA, bool transA, const void* colB, bool transB, DType ab,
              int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldd, float alpha, float beta,
              Varying varying);
  cudaStream_t stream_;
  std::map<Shape, std::unique_ptr<Plan>> plans_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_;
};

}  // namespace mt::cuda
