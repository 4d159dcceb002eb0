// CudnnAttention's private half, shared by its source files (cudnn_attention*.cpp): the Graph one bucket (or tile)
// shape's plan lives in (its tensors' uids and align_up are cudnn_sdpa_graph.h's), built by our builder or by
// cudnn-frontend as the cudnn_graphs switch says. Invariant: a Graph owns exactly one of the two (the builder with its
// descriptors and scalars, or the frontend's graph) and its device side memory, and frees them with it.
#pragma once
#include <cudnn.h>

#include <cstdint>
#include <memory>

#include "kernels/attention/cudnn_attention.h"
#include "kernels/attention/cudnn_graph_builder.h"
#include "kernels/attention/cudnn_sdpa_frontend.h"
#include "kernels/attention/cudnn_sdpa_graph.h"

namespace mt::cuda {

struct CudnnAttention::Graph {
  Key key;
  CudnnPlanInfo info;
  std::unique_ptr<CudnnGraphBuilder> builder;
  cudnnBackendDescriptor_t plan = nullptr;
  // cudnn_graphs=frontend: the frontend's graph, which keeps its side tensors inside its workspace (plan_bytes the
  // whole of it, side none); builder and plan unset.
  std::unique_ptr<SdpaGraph> sdpa;
  int64_t plan_bytes = 0;
  // Our fp32 side tensors (the softmax sum; a non-deterministic backward's dQ accumulator: the graph's, or, ragged,
  // the call's rows at dQ's offsets as cudnn-frontend's THD accumulator, sized per call by ragged_dq_accum_bytes).
  SdpaSideTensors side;
  // Its plan's workspace with our side tensors past it (what info.workspace_bytes holds, save a ragged forward's 0).
  int64_t plan_and_side_bytes() const { return plan_bytes + side.softmax_sum_bytes + side.dq_accum_bytes; }
  bool padding = false;          // the graph has the padding mask (seq_lens, or the full-length workaround)
  bool alibi = false;            // the graph adds ALiBi's bias (the shape's slopes bound per call)
  int32_t* full_lens = nullptr;  // device [batch] = seq: the workaround's lengths when the shape has no seq_lens
  float* sinks = nullptr;        // device [n_heads]: the forward's sink logits in fp32 (cast from the shape's per call)
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
    if (full_lens) release(full_lens);
    if (sinks) release(sinks);
    if (ragged_ints) release(ragged_ints);
  }
};

}  // namespace mt::cuda
