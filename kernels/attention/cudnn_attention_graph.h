// CudnnAttention's private half, shared by its source files (cudnn_attention*.cpp): the Graph one bucket (or tile)
// shape's plan lives in, cudnn-frontend's (cudnn_sdpa_frontend.h: its tensors' uids and align_up too). Invariant: a
// Graph owns its frontend graph and its device side memory, and frees them with it.
#pragma once
#include <cstdint>
#include <memory>

#include "kernels/attention/cudnn_attention.h"
#include "kernels/attention/cudnn_sdpa_frontend.h"

namespace mt::cuda {

struct CudnnAttention::Graph {
  Key key;
  CudnnPlanInfo info;
  // The frontend's graph and plan (unset where the graph was refused), which keeps its side tensors (the softmax sum,
  // a non-deterministic backward's dQ accumulator) inside its workspace.
  std::unique_ptr<SdpaGraph> sdpa;
  int64_t plan_bytes = 0;  // its plan's workspace, 256-aligned (what info.workspace_bytes holds, save a ragged
                           // forward's 0)
  bool padding = false;    // the graph has the padding mask (seq_lens)
  bool alibi = false;      // the graph adds ALiBi's bias (the shape's slopes bound per call)
  float* sinks = nullptr;  // device [n_heads]: the forward's sink logits in fp32 (cast from the shape's per call)
  // A ragged graph's own device memory: its Q/O and K/V offsets [batch + 1] each and lengths [batch], then a
  // forward's plan workspace (a few KiB: 1280 B at 2 × 256, 8/2 heads), so that it takes none of the shared workspace
  // (a backward's plan workspace is the shared one's start).
  int32_t* ragged_ints = nullptr;
  void* ragged_workspace = nullptr;
  int64_t batch() const { return std::get<1>(key); }
  int32_t* q_offsets() const { return ragged_ints; }
  int32_t* kv_offsets() const { return ragged_ints + batch() + 1; }
  int32_t* ragged_lens() const { return ragged_ints + 2 * batch() + 2; }
  Free release;
  ~Graph() {
    if (sinks) release(sinks);
    if (ragged_ints) release(ragged_ints);
  }
};

}  // namespace mt::cuda
