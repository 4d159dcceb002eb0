// cuDNN's fused attention as an operation graph: the runtime fusion engine's "fused flash attention" fprop and bprop
// patterns (the SDPA graphs cudnn-frontend builds), added to a CudnnGraphBuilder tensor by tensor and operation by
// operation for one AttnShape and one variant (direction, dQ's accumulation, masks, ragged offsets, sinks). Invariant:
// the graph's non-virtual tensors are the Uid ones below and its scalars are by value (the builder keeps them); adding
// a graph needs no cuDNN handle and no GPU (the builder's plan() does), so every variant can be built anywhere cuDNN's
// library loads.
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "kernels/attention/cudnn_graph_builder.h"

namespace mt::cuda {

// Non-virtual tensors (the variant pack's device pointers); virtual tensors and scalars get uids from 100 up.
enum Uid : int64_t {
  uid_q = 1,
  uid_k,
  uid_v,
  uid_o,
  uid_stats,
  uid_do,
  uid_dq,
  uid_dk,
  uid_dv,
  uid_seq_q,
  uid_seq_kv,
  uid_softmax_sum,
  uid_dq_accum,
  uid_sinks,
  uid_alibi,
  uid_q_ragged,
  uid_kv_ragged
};

// Bytes rounded up to the 256-byte unit our workspace is carved in.
constexpr int64_t align_up(int64_t n) { return (n + 255) / 256 * 256; }

// The scale on the scores (the shape's, else 1/√head_dim) and the sliding window the graph masks (0: none, also where
// the window covers the sequence).
float sdpa_scale(const AttnShape& s);
int64_t sdpa_window(const AttnShape& s);

// Which graph of a shape: graph()'s key beyond the shape.
struct SdpaGraphSpec {
  bool backward = false;
  bool deterministic = true;  // a backward's dQ straight into dQ (false: through an fp32 accumulator by atomics)
  bool padding = false;       // the padding mask of seq_len_q / seq_len_kv (uid_seq_q, uid_seq_kv)
  bool causal = true;         // false: a tile below the diagonal of the tiled backward, unmasked
  bool ragged = false;        // sequences at per-sequence offsets (uid_q_ragged, uid_kv_ragged); padding must be set
  bool sinks = false;         // the forward's attention sinks (uid_sinks)
  int64_t version = 0;        // the cuDNN it is for (cudnnGetVersion): -inf's spelling, 9.0's second padding mask
};

// The fp32 side tensors of our workspace that a graph reads or writes (bytes 256-aligned).
struct SdpaSideTensors {
  int64_t softmax_sum_bytes = 0;  // the backward's Σ dO·O per row (uid_softmax_sum)
  int64_t dq_accum_bytes = 0;     // a non-deterministic backward's dQ accumulator (uid_dq_accum), unragged
  bool ragged_dq_accum = false;   // a ragged non-deterministic backward's: dQ's rows and offsets, sized per call
};

// Adds the fprop (spec.backward false) or bprop graph of shape s to B; B.ok() and B.error() say whether every
// descriptor finalized.
SdpaSideTensors add_sdpa_graph(CudnnGraphBuilder& B, const AttnShape& s, const SdpaGraphSpec& spec);

}  // namespace mt::cuda
