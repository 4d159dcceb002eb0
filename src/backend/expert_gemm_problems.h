// The problem lists of the grouped expert GEMMs, built on the host for one grouped launch (the CUDA backend's
// kernels/runtime/cutlass_grouped_gemm.h): one GEMM per expert with rows, in CUTLASS's convention
// D[m, n] = A[m, k] · B[k, n] (+ beta·C, C = D), D row-major, and the device arrays the launch reads (problem shapes,
// operand addresses, leading dimensions) packed into one buffer.
// Invariant: an expert without rows has no problem (backward weight's K = 0 leaves its dw_e untouched);
// `unsupported` is empty exactly when every extent fits int32 and every operand meets the kernel's 16-byte TMA
// alignment (each address, each leading dimension, which is also each operand's contiguous extent), else it names
// the first thing that does not, and the caller runs the loop of GEMMs instead. Addresses are device addresses:
// nothing here dereferences them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mt {

// The three GEMMs of a grouped linear layer (bf16 operands, fp32 accumulation), experts e with rows_e rows from
// offsets[e], w_e = w + e·w_stride ([O, I] row-major):
enum class ExpertGemm {
  forward,          // y[rows_e, O] (bf16) = x[rows_e, I] · w_eᵀ: A = x (K-major), B = w_e (K-major); m rows_e, n O, k I
  backward_data,    // dx[rows_e, I] (bf16) = dy[rows_e, O] · w_e (+ dx): A = dy (K-major), B = w_e (N-major); n I, k O
  backward_weight,  // dw_e[O, I] (fp32) += dy[rows_e, O]ᵀ · x[rows_e, I]: A = dyᵀ (M-major), B = x (N-major);
                    // m O, n I, k rows_e
};
const char* expert_gemm_name(ExpertGemm g);  // "forward", "backward data", "backward weight"

struct ExpertGemmProblem {
  int32_t m = 0, n = 0, k = 0;
  uint64_t a = 0, b = 0, d = 0;    // device addresses of A, B and D (= C)
  int64_t lda = 0, ldb = 0, ldd = 0;  // leading dimensions in elements

  bool operator==(const ExpertGemmProblem&) const = default;
};

struct ExpertGemmProblems {
  std::vector<ExpertGemmProblem> problems;  // in expert order
  std::string unsupported;                  // empty, or why the launch cannot take these problems
};

inline constexpr int64_t kExpertGemmAlignmentBytes = 16;  // TMA: addresses and row pitches

// The problems of GEMM g over the experts of offsets [E+1] (host memory). out: y, dx or dw; a: x (forward) or dy;
// b: w (forward, backward data) or x (backward weight); w_stride steps w (forward, backward data) or dw (backward
// weight) from one expert to the next, in elements.
ExpertGemmProblems expert_gemm_problems(ExpertGemm g, uint64_t out, uint64_t a, uint64_t b, int64_t w_stride,
                                        const int64_t* offsets, int64_t E, int64_t I, int64_t O);

// Byte offsets of the device arrays of n problems in one buffer, each section 16-byte aligned: the shapes (int32
// m, n, k per problem), the addresses of A, B, C and D (uint64 each; C = D) and the leading dimensions of A, B, C and
// D (int64 each).
struct ExpertGemmArrays {
  int64_t shapes = 0, a = 0, b = 0, c = 0, d = 0, lda = 0, ldb = 0, ldc = 0, ldd = 0, bytes = 0;
};
ExpertGemmArrays expert_gemm_arrays(int64_t n);
// Writes problems into dst, which holds expert_gemm_arrays(problems.size()).bytes.
void pack_expert_gemm_arrays(const std::vector<ExpertGemmProblem>& problems, std::byte* dst);

// One log line (info) saying that GEMM g runs as the loop of GEMMs and why; the CUDA backend writes it once per reason.
void log_expert_gemm_fallback(ExpertGemm g, const std::string& reason);

}  // namespace mt
