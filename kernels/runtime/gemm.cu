// cuBLASLt GEMMs (see gemm.h). Row-major problems are issued as their column-major transposes:
// row-major C = A·op(B) is column-major Cᵀ = op(B)ᵀ·Aᵀ, so the operands swap places.
#include "kernels/runtime/gemm.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <initializer_list>

#include "kernels/ops/cuda_check.h"
#include "core/error.h"

namespace mt::cuda {
namespace {

cudaDataType_t cuda_type(DType t) { return t == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F; }

// The largest power of two (at most 256, cuBLASLt's default assumption) dividing every address.
int common_alignment(std::initializer_list<const void*> pointers) {
  uintptr_t bits = 256;
  for (const void* p : pointers) bits |= reinterpret_cast<uintptr_t>(p);
  return static_cast<int>(bits & (~bits + 1));
}

// An expert's row count rounded up to its plan's bucket.
int64_t row_bucket(int64_t rows) { return static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(std::max<int64_t>(rows, 64)))); }

// Sets a layout's rows and columns (the plan's layouts describe its bucket; each call describes its own size).
void resize(cublasLtMatrixLayout_t layout, int64_t rows, int64_t cols) {
  const uint64_t r = static_cast<uint64_t>(rows), c = static_cast<uint64_t>(cols);
  MT_CHECK_CUBLAS(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_ROWS, &r, sizeof(r)));
  MT_CHECK_CUBLAS(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_COLS, &c, sizeof(c)));
}

}  // namespace

// The descriptors and algorithm of one shape, for the Gemm's lifetime.
struct Gemm::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  Plan() = default;
  Plan(const Plan&) = delete;  // owns its descriptors
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

Gemm::Gemm(cudaStream_t stream, int64_t workspace_bytes)
    : stream_(stream), workspace_bytes_(static_cast<std::size_t>(workspace_bytes)) {
  MT_CHECK_CUBLAS(cublasLtCreate(&handle_));
  MT_CHECK_CUDA(cudaMalloc(&workspace_, workspace_bytes_));
}

Gemm::~Gemm() {
  cudaFree(workspace_);
  cublasLtDestroy(handle_);
}

Gemm::Plan& Gemm::plan_for(const Shape& shape) {
  auto& slot = plans_[shape];
  if (slot) return *slot;
  [[maybe_unused]] const auto [d_type, transA, transB, ab_type, m, n, k, lda, ldb, ldd, alignment, bucketed] = shape;
  const auto ab = static_cast<DType>(ab_type), d = static_cast<DType>(d_type);
  auto plan = std::make_unique<Plan>();
  MT_CHECK_CUBLAS(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = transA ? CUBLAS_OP_T : CUBLAS_OP_N, tb = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  MT_CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  MT_CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  const cudaDataType_t abt = cuda_type(ab), dt = cuda_type(d);
  MT_CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&plan->a, abt, transA ? k : m, transA ? m : k, lda));
  MT_CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&plan->b, abt, transB ? n : k, transB ? k : n, ldb));
  MT_CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&plan->d, dt, m, n, ldd));

  cublasLtMatmulPreference_t pref = nullptr;
  MT_CHECK_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
  MT_CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                       &workspace_bytes_, sizeof(workspace_bytes_)));
  const uint32_t align = static_cast<uint32_t>(alignment);
  for (const cublasLtMatmulPreferenceAttributes_t attr :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    MT_CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, plan->op, plan->a, plan->b, plan->d, plan->d,
                                                           pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  MT_REQUIRE(st == CUBLAS_STATUS_SUCCESS && found > 0,
             "cuBLASLt has no algorithm for a {}x{}x{} GEMM ({} operands, {} output): {}", m, n, k, dtype_name(ab),
             dtype_name(d), cublasLtGetStatusString(st));
  plan->algo = result.algo;
  slot = std::move(plan);
  return *slot;
}

void Gemm::matmul(void* D, const void* C, DType d, const void* colA, bool transA, const void* colB, bool transB,
                  DType ab, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldd, float alpha,
                  float beta, Varying varying) {
  if (m == 0 || n == 0) return;
  MT_ASSERT(k > 0, "gemm with k = 0");
  if (!C) C = D;
  const int alignment = common_alignment({colA, colB, C, D});
  const auto launch = [&](const Plan& plan) {
    return cublasLtMatmul(handle_, plan.op, &alpha, colA, plan.a, colB, plan.b, &beta, C, plan.d, D, plan.d,
                          &plan.algo, workspace_, workspace_bytes_, stream_);
  };
  const auto exact = [&]() -> const Plan& {
    return plan_for({static_cast<int>(d), transA, transB, static_cast<int>(ab), m, n, k, lda, ldb, ldd, alignment,
                     false});
  };
  if (varying != Varying::none) {
    const int64_t pn = varying == Varying::n ? row_bucket(n) : n, pk = varying == Varying::k ? row_bucket(k) : k;
    Plan& plan = plan_for({static_cast<int>(d), transA, transB, static_cast<int>(ab), m, pn, pk, lda, ldb, ldd,
                           alignment, true});
    resize(plan.a, transA ? k : m, transA ? m : k);  // read by cublasLtMatmul only: the next call resizes again
    resize(plan.b, transB ? n : k, transB ? k : n);
    resize(plan.d, m, n);
    if (launch(plan) == CUBLAS_STATUS_SUCCESS) return;
  }
  MT_CHECK_CUBLAS(launch(exact()));
}

void Gemm::run(void* C, DType c, const void* A, const void* B, DType ab, bool b_transposed, int64_t M, int64_t N,
               int64_t K, float alpha, float beta, bool rows_vary, RowStrides ld) {
  matmul(C, nullptr, c, B, b_transposed, A, false, ab, N, M, K, b_transposed ? K : N, ld.a ? ld.a : K, ld.c ? ld.c : N,
         alpha, beta, rows_vary ? Varying::n : Varying::none);
}

void Gemm::run_add(void* D, const void* R, const void* A, const void* B, DType ab, int64_t M, int64_t N, int64_t K,
                   float alpha) {
  MT_ASSERT(R != D, "gemm: the residual aliases the output");
  matmul(D, R, ab, B, true, A, false, ab, N, M, K, K, K, N, alpha, 1.0f, Varying::none);
}

void Gemm::run_at_b(float* C, const void* A, const void* B, DType ab, int64_t M, int64_t N, int64_t K, float alpha,
                    float beta, bool rows_vary, RowStrides ld) {
  matmul(C, nullptr, DType::f32, B, false, A, true, ab, N, M, K, N, ld.a ? ld.a : M, ld.c ? ld.c : N, alpha, beta,
         rows_vary ? Varying::k : Varying::none);
}

}  // namespace mt::cuda
