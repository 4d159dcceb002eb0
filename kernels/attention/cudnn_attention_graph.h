// CudnnAttention's private half, shared by its source files (cudnn_attention*.cpp): the Graph one bucket (or tile)
// shape's plan lives in (its tensors' uids and align_up are cudnn_sdpa_graph.h's). Invariant: a Graph owns its
// cudnn-frontend graph and its device side memory, and frees them with it.
#pragma once
#include <cstdint>
#include <memory>

#include "kernels/attention/cudnn_attention.h"
#include "kernels/attention/cudnn_sdpa_frontend.h"

namespace mt::cuda {

struct CudnnAttention::Graph {
  Key key;
  CudnnPlanInfo info;  // info.workspace_bytes: the frontend's (the plan's and its side tensors: softmax sum, dQ accumulator)
  std::unique_ptr<SdpaGraph> sdpa;
  bool padding = false;  // the graph has the padding mask (seq_lens bound per call)
  bool alibi = false;    // the graph adds ALiBi's bias (the shape's slopes bound per call)
  float* sinks = nullptr;  // device [n_heads]: the forward's sink logits in fp32 (cast from the shape's per call)
  // A ragged graph's own device memory: its Q/O and K/V offsets [batch + 1] each and lengths [batch], then a
  // forward's workspace (a few KiB: 1280 B at 2 × 256, 8/2 heads), so that it takes none of the shared workspace
  // (a backward's workspace is the shared one's start).
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
