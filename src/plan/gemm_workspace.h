// GEMM workspace sizes: the one source for the CUDA backend's Gemm objects, its CUTLASS grouped GEMM and the memory
// plan.
// Invariant: the backend allocates at most these bytes (the main stream's Gemm always; the expert streams' Gemms at
// the first loop of expert GEMMs, so only models with MoE layers hold them; CUTLASS's workspace and problem arrays at
// the first grouped launch, only with moe_gemm cutlass in bf16), and the plan counts the same.
#pragma once
#include <cstdint>

#include "backend/expert_gemm_problems.h"

namespace mt {

inline constexpr int64_t kGemmWorkspaceBytes = int64_t{64} << 20;        // the backend stream's Gemm
inline constexpr int kExpertGemmStreams = 4;                             // streams the experts' GEMMs spread over
inline constexpr int64_t kExpertGemmWorkspaceBytes = int64_t{32} << 20;  // each expert stream's Gemm
// CUTLASS's grouped GEMM workspace: its TMA descriptors, 128 bytes each, 5 per SM (A, B, C and a D per epilogue
// warp group, two): get_workspace_size gives 84 480 bytes for each of the three kernels on the 132 SMs of an H100 or
// H200 (a host-side check of the built kernels); the backend grows past it only where a launch asks for more.
inline constexpr int64_t kCutlassGemmWorkspaceBytes = int64_t{256} << 10;
// The ring of problem arrays of CUTLASS's grouped launches (page-locked and device copies of each): the host fills
// a slot only once the copy of the launch kExpertGemmArraySlots launches before it has finished.
inline constexpr int kExpertGemmArraySlots = 16;

// GPU bytes of CUTLASS's grouped GEMM for layers of at most `experts` experts: the workspace and the device arrays.
inline int64_t cutlass_gemm_bytes(int64_t experts) {
  return kCutlassGemmWorkspaceBytes + kExpertGemmArraySlots * expert_gemm_arrays(experts).bytes;
}

// GPU bytes of every GEMM workspace a run holds: experts, the most experts of any MoE layer (0: none); cutlass,
// whether the expert GEMMs go through CUTLASS (moe_gemm cutlass in bf16; the loop's lanes are held too, for what
// falls back to it).
inline int64_t gemm_workspace_bytes(int64_t experts, bool cutlass) {
  if (experts == 0) return kGemmWorkspaceBytes;
  const int64_t loop = kExpertGemmStreams * kExpertGemmWorkspaceBytes;
  return kGemmWorkspaceBytes + loop + (cutlass ? cutlass_gemm_bytes(experts) : 0);
}

}  // namespace mt
