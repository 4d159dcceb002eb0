// cuBLASLt workspace sizes: the one source for the CUDA backend's Gemm objects and for the memory plan.
// Invariant: the backend allocates exactly these bytes (the main stream's Gemm always; the expert streams' Gemms at
// the first grouped expert GEMM, so only models with MoE layers hold them), and the plan counts the same.
#pragma once
#include <cstdint>

namespace mt {

inline constexpr int64_t kGemmWorkspaceBytes = int64_t{64} << 20;        // the backend stream's Gemm
inline constexpr int kExpertGemmStreams = 4;                             // streams the experts' GEMMs spread over
inline constexpr int64_t kExpertGemmWorkspaceBytes = int64_t{32} << 20;  // each expert stream's Gemm

// GPU bytes of every cuBLASLt workspace a run holds.
inline int64_t gemm_workspace_bytes(bool has_moe_layers) {
  return kGemmWorkspaceBytes + (has_moe_layers ? kExpertGemmStreams * kExpertGemmWorkspaceBytes : 0);
}

}  // namespace mt
