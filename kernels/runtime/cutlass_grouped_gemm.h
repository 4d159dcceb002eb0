// CUTLASS's Hopper grouped GEMM for the experts' bf16 GEMMs (the cutlass mode of kernels/runtime/grouped_gemm.h):
// every expert of one GEMM in one persistent launch (the ptr-array grouped GEMM: TMA loads, warp-specialized
// cooperative wgmma, fp32 accumulation). Three kernels, compiled for sm_90a only (their own library): forward (bf16 y,
// 128×256×64 tiles), backward data (bf16 dx, beta 0 or 1, 128×256×64) and backward weight (fp32 dw, beta 1,
// 128×128×64), over the problems of backend/expert_gemm_problems.h.
// Invariant: every launch is ordered on the stream; its device arrays are copied from its slot of a ring of
// kExpertGemmArraySlots page-locked buffers, which the host fills only once that slot's previous copy has finished
// (its event), so no copy reads a slot being rewritten; the workspace and the arrays are those plan/gemm_workspace.h's
// cutlass_gemm_bytes counts (the workspace grows past kCutlassGemmWorkspaceBytes only if a launch needs more, which
// the GPU test asserts it does not on the H100 and H200).
#pragma once
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/expert_gemm_problems.h"
#include "plan/gemm_workspace.h"

namespace mt::cuda {

class CutlassGroupedGemm {
 public:
  explicit CutlassGroupedGemm(cudaStream_t stream);
  ~CutlassGroupedGemm();
  CutlassGroupedGemm(const CutlassGroupedGemm&) = delete;
  CutlassGroupedGemm& operator=(const CutlassGroupedGemm&) = delete;

  // Why the current device cannot run the kernels (built for sm_90a: compute capability 9.0 only), or "".
  static std::string unsupported_device();

  // Launches GEMM g over problems (their `unsupported` empty): D = A·B + beta·D, beta backward data's (0 or 1;
  // forward takes 0, backward weight 1). Returns "" or CUTLASS's reason for refusing them (can_implement), having
  // launched nothing. No problems: nothing.
  std::string run(ExpertGemm g, const std::vector<ExpertGemmProblem>& problems, float beta);

  int64_t workspace_bytes() const { return workspace_bytes_; }  // the workspace held (grown to the largest need)

 private:
  // One launch's arrays: page-locked host bytes, their device copy, and the event after the copy.
  struct Slot {
    std::byte* host = nullptr;
    std::byte* device = nullptr;
    int64_t bytes = 0;
    cudaEvent_t copied = nullptr;
  };
  // One launch of a kernel type of cutlass_grouped_gemm.cu (defined and instantiated there only).
  template <class Kernel>
  std::string launch(ExpertGemm g, const std::vector<ExpertGemmProblem>& problems, float beta);
  // The next slot of the ring with its previous copy finished, holding at least `bytes`.
  Slot& next_slot(int64_t bytes);
  // The workspace, grown to at least `bytes` (the stream synchronised first: a launch may still read the old one).
  void* workspace(int64_t bytes);

  cudaStream_t stream_;
  int device_ = 0;
  int sm_count_ = 0;
  std::array<Slot, kExpertGemmArraySlots> slots_;
  size_t next_ = 0;
  void* workspace_ = nullptr;
  int64_t workspace_bytes_ = 0;
};

}  // namespace mt::cuda
