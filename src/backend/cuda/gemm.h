// Row-major GEMMs through cuBLASLt for the linear layers and the LM head: bf16 or fp32 operands,
// fp32 accumulation (TF32 off in fp32 mode), outputs in the operand type or fp32.
// Invariant: every call is enqueued on the given stream; plans are cached per shape and operand alignment (the
// heuristic only returns algorithms whose vector loads the pointers allow: rows of an expert's slice may be 16-byte
// aligned only).
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "core/dtype.h"

namespace mt::cuda {

class Gemm {
 public:
  explicit Gemm(cudaStream_t stream);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Row-major C[M,N] = alpha · A[M,K] · op(B) + beta · C, where op(B) = B[N,K]ᵀ when b_transposed (the
  // "x · wᵀ" of a linear layer) and B[K,N] otherwise. A, B in `ab`; C in `c` (`ab` or f32).
  void run(void* C, DType c, const void* A, const void* B, DType ab, bool b_transposed, int64_t M, int64_t N,
           int64_t K, float beta);
  // Row-major C[M,N] (+)= A[K,M]ᵀ · B[K,N]: the weight gradient dyᵀ·x, accumulated in fp32 C.
  void run_at_b(float* C, const void* A, const void* B, DType ab, int64_t M, int64_t N, int64_t K, float beta);

 private:
  // One column-major problem: descriptors and the heuristic's algorithm, built on first use.
  struct Plan;
  using Shape = std::tuple<int, bool, bool, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int>;
  const Plan& plan_for(const Shape& shape);
  void matmul(void* D, DType d, const void* colA, bool transA, const void* colB, bool transB, DType ab, int64_t m,
              int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldd, float beta);
  cudaStream_t stream_;
  std::map<Shape, std::unique_ptr<Plan>> plans_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 64u << 20;
};

}  // namespace mt::cuda
