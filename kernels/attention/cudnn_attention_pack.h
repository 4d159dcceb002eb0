// A call's tensors bound to a CudnnAttention graph (cudnn_attention_graph.h) and the graph run: the variant pack's
// uids and pointers, the forward's and backward's tensors, ALiBi's slopes, sinks, the dQ accumulator and a ragged
// graph's offsets. Invariant: every uid a graph declares non-virtual is bound by the call's helpers before execute,
// and its scalars by execute itself.
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

// Runs g's plan with the bindings plus the graph's scalars (the builder's), or the frontend's graph with them less
// the side tensors it keeps itself.
void execute(void* handle, const CudnnAttention::Graph& g, Bindings b, void* workspace);

// A forward graph's tensors; lens (its padding mask's lengths) nullptr where it has none.
Bindings forward_bindings(const void* q, const void* k, const void* v, void* out, void* stats, const void* lens);

// A backward graph's ten tensors (its lengths, ragged offsets, ALiBi's slopes and dQ accumulator are bound apart).
Bindings backward_bindings(const void* q, const void* k, const void* v, const void* out, const void* dout,
                           const void* stats, void* dq, void* dk, void* dv, void* softmax_sum);

// A forward graph's ALiBi slopes and sinks (cast into the graph's fp32 copy: cuDNN takes them as fp32, ours are the
// compute dtype's).
void bind_bias_and_sinks(const CudnnAttention::Graph& g, const AttnShape& s, Bindings& ptrs, cudaStream_t stream);

// A non-deterministic backward's fp32 dQ accumulator of `bytes` (the graph's, or a ragged call's), past its plan
// workspace and softmax sum; zeroed here before cuDNN 9.6, which zeroes it itself.
void bind_dq_accum(const CudnnAttention::Graph& g, int64_t bytes, char* ws, int64_t version, Bindings& ptrs,
                   cudaStream_t stream);

// A ragged non-deterministic backward's dQ accumulator over a call of rows_in_call rows (0 for any other graph).
int64_t ragged_dq_accum_bytes(const CudnnAttention::Graph& g, const AttnShape& g_shape, int64_t rows_in_call);

// Where a ragged backward's stats begin in the shared workspace: past its plan workspace, softmax sum and dQ
// accumulator.
int64_t ragged_stats_offset(const CudnnAttention::Graph& g, const AttnShape& g_shape, int64_t rows_in_call);

// A ragged graph's offsets and lengths (ragged_offsets, into the graph's own ints) bound: the padding mask's lengths,
// the Q/O and the K/V offsets.
void bind_ragged(const CudnnAttention::Graph& g, const AttnShape& g_shape, const int32_t* starts, const int32_t* lens,
                 int64_t seq, int64_t rows_in_call, Bindings& ptrs, cudaStream_t stream);

}  // namespace mt::cuda
