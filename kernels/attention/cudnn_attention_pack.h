// A call's tensors bound to a CudnnAttention graph (cudnn_attention_graph.h) and the graph run: the variant pack's
// uids and pointers, the forward's and backward's tensors, ALiBi's slopes, sinks and a ragged graph's offsets.
// Invariant: every uid a graph declares non-virtual is bound by the call's helpers before execute (its side tensors
// are the frontend's, inside the workspace).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "kernels/attention/cudnn_attention_graph.h"

namespace mt::cuda {

// The variant pack's uids and device (or, for scalars, host) pointers.
struct Bindings {
  std::vector<int64_t> uids;
  std::vector<void*> ptrs;
  void add(int64_t uid, const void* p) {
    uids.push_back(uid);
    ptrs.push_back(const_cast<void*>(p));
  }
};

// Runs g's plan with the bindings and the workspace (the plan's, g.info.workspace_bytes).
void execute(void* handle, const CudnnAttention::Graph& g, const Bindings& b, void* workspace);

// A forward graph's tensors; lens (its padding mask's lengths) nullptr where it has none.
Bindings forward_bindings(const void* q, const void* k, const void* v, void* out, void* stats, const void* lens);

// A backward graph's nine tensors (its lengths, ragged offsets and ALiBi's slopes are bound apart).
Bindings backward_bindings(const void* q, const void* k, const void* v, const void* out, const void* dout,
                           const void* stats, void* dq, void* dk, void* dv);

// A forward graph's ALiBi slopes and sinks (cast into the graph's fp32 copy: cuDNN takes them as fp32, ours are the
// compute dtype's).
void bind_bias_and_sinks(const CudnnAttention::Graph& g, const AttnShape& s, Bindings& ptrs, cudaStream_t stream);

// A ragged graph's offsets and lengths (ragged_offsets, into the graph's own ints) bound: the padding mask's lengths,
// the Q/O and the K/V offsets.
void bind_ragged(const CudnnAttention::Graph& g, const AttnShape& g_shape, const int32_t* starts, const int32_t* lens,
                 int64_t seq, int64_t rows_in_call, Bindings& ptrs, cudaStream_t stream);

}  // namespace mt::cuda
