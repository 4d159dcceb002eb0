// The expert GEMMs of a mixture-of-experts layer over rows grouped by expert (offsets [E+1] in host memory):
// either a loop of cuBLASLt GEMMs, one per expert that has rows, spread round-robin over kExpertGemmStreams
// streams (plan/gemm_workspace.h; MEGATRAIN_MOE_GEMM_STREAMS=1..that lowers it, to measure), or one grouped call for
// all of them: cuBLAS's cublasGemmGroupedBatchedEx (grouped) or CUTLASS's Hopper grouped GEMM (cutlass,
// kernels/runtime/cutlass_grouped_gemm.h). MEGATRAIN_MOE_GEMM=loop|grouped|cutlass picks one (default loop) so that
// they can be measured on the same run. Grouped applies to fp32 problems only: on the H200 with CUDA 13.0, cuBLAS
// refuses cublasGemmGroupedBatchedEx for our bf16 problems ("the requested functionality is not supported"), so bf16
// runs as the loop there. Cutlass applies to bf16 problems only, on compute capability 9.0 (its kernels are sm_90a):
// fp32 problems run the loop, and so do bf16 ones it cannot take (I or O not a multiple of 8, an operand not 16-byte
// aligned, CUTLASS's refusal), the reason in one log line at the first such call of each GEMM. One expert's GEMM
// alone does not fill an H200 (about 1 000 rows of 768 columns per micro-batch at Qwen3-30B-A3B's shape), hence the
// streams and the grouped calls. Never one launch per token.
// Invariant: every call is ordered on the backend's stream (the expert streams fork from it and join it again
// before the call returns); experts write disjoint outputs, so the streams change no bits; experts without rows are
// skipped; fp32 accumulation, dw in fp32 accumulated (beta 1).
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/runtime/gemm.h"
#include "backend/expert_gemm_problems.h"
#include "core/dtype.h"
#include "core/runtime_switches.h"

namespace mt::cuda {

class CutlassGroupedGemm;

class GroupedGemm {
 public:
  // mode: the moe_gemm switch (a GEMM per expert, or one grouped call of cuBLAS or CUTLASS); lanes: moe_gemm_streams.
  GroupedGemm(cudaStream_t stream, MoeGemmChoice mode, int lanes);
  ~GroupedGemm();
  GroupedGemm(const GroupedGemm&) = delete;
  GroupedGemm& operator=(const GroupedGemm&) = delete;

  // y[rows_e, O] = x[rows_e, I] · w_eᵀ, w_e = w + e·w_stride elements ([O, I]).
  void forward(void* y, const void* x, const void* w, int64_t w_stride, const int64_t* offsets, int64_t E, int64_t I,
               int64_t O, DType t);
  // dx[rows_e, I] = dy[rows_e, O] · w_e (+ dx when beta is 1).
  void backward_data(void* dx, const void* dy, const void* w, int64_t w_stride, const int64_t* offsets, int64_t E,
                     int64_t I, int64_t O, DType t, float beta);
  // dw_e[O, I] += dy[rows_e, O]ᵀ · x[rows_e, I] (fp32), dw_e = dw + e·w_stride.
  void backward_weight(float* dw, const void* dy, const void* x, int64_t w_stride, const int64_t* offsets, int64_t E,
                       int64_t I, int64_t O, DType t);

 private:
  // One column-major problem per expert with rows: C = op(A)·op(B), m × n × k, leading dimensions.
  struct Problem {
    const void* a;
    const void* b;
    void* c;
    int m, n, k, lda, ldb, ldc;
  };
  void grouped(const std::vector<Problem>& problems, bool trans_a, bool trans_b, DType ab, DType c, float beta);
  // Whether GEMM g of element type t ran through CUTLASS (mode cutlass, bf16, problems it takes; operands as
  // expert_gemm_problems names them); false: the caller runs the loop, the reason logged at g's first such call.
  bool through_cutlass(ExpertGemm g, DType t, const void* out, const void* a, const void* b, int64_t w_stride,
                       const int64_t* offsets, int64_t E, int64_t I, int64_t O, float beta);

  // An expert stream with its own Gemm (cuBLASLt workspaces cannot be shared by concurrent GEMMs).
  struct Lane {
    cudaStream_t stream = nullptr;
    std::unique_ptr<Gemm> gemm;
    cudaEvent_t done = nullptr;
  };
  // The lanes, made at the first loop call, forked from the backend's stream; f(gemm, i) issues the i-th GEMM.
  template <typename F>
  void on_lanes(int64_t count, F f);

  cudaStream_t stream_;
  std::vector<Lane> lanes_;
  int lane_count_;
  cudaEvent_t fork_ = nullptr;
  // Whether problems of element type t go to cublasGemmGroupedBatchedEx (else the loop of cuBLASLt GEMMs).
  bool grouped_call(DType t) const { return mode_ == MoeGemmChoice::grouped && t == DType::f32; }
  MoeGemmChoice mode_;
  cublasHandle_t handle_ = nullptr;
  void** device_pointers_ = nullptr;  // A, B, C pointer arrays for the grouped call
  int64_t pointer_capacity_ = 0;
  std::string cutlass_device_;                   // mode cutlass: why this GPU cannot run it, or ""
  std::unique_ptr<CutlassGroupedGemm> cutlass_;  // made at the first call it takes
  bool fallback_logged_[3] = {false, false, false};  // per ExpertGemm: the loop's reason logged
};

}  // namespace mt::cuda
