// cuDNN's ragged calls (see cudnn_attention.h): a batch, or a packed call's segment group, as one graph whose
// sequences start at per-sequence offsets, so that each is read and written in place. Invariant: a ragged call runs
// only where its graph finalized and its offsets fit int32 (ragged_forward_bytes, ragged_backward_bytes); its padded
// rows are neither computed nor written.
#include <algorithm>
#include <limits>
#include <utility>

#include "kernels/attention/cudnn_attention.h"
#include "kernels/attention/cudnn_attention_graph.h"
#include "kernels/attention/cudnn_attention_pack.h"
#include "core/error.h"

namespace mt::cuda {
namespace {

// A value head dim of its own (latent attention) runs the padded graphs: O's rows would need offsets of their own,
// where Q and O share one offset tensor here.
bool ragged_widths(const AttnShape& s) { return s.value_head_dim() == s.head_dim; }

}  // namespace

int64_t CudnnAttention::ragged_forward_bytes(const AttnShape& g_shape, int64_t rows_in_call, bool stats_here) {
  const int64_t width = std::max(g_shape.n_heads, g_shape.n_kv_heads) * g_shape.head_dim;
  if (!plan_.ragged() || !ragged_widths(g_shape) || rows_in_call * width > std::numeric_limits<int32_t>::max())
    return -1;
  const Graph& g = graph(false, g_shape, true, true, true, true);
  if (!g.info.ok) return -1;
  return stats_here ? align_up(g_shape.batch * g_shape.n_heads * g_shape.seq * 4) : 0;
}

void CudnnAttention::ragged_forward(__nv_bfloat16* out, float* stats, const __nv_bfloat16* q, const __nv_bfloat16* k,
                                    const __nv_bfloat16* v, const AttnShape& g_shape, const int32_t* starts,
                                    const int32_t* lens, int64_t seq, int64_t rows_in_call) {
  Graph& g = graph(false, g_shape, true, true, true, true);
  MT_ASSERT(g.info.ok, "a ragged forward without its graph: ragged_forward_bytes refuses it first");
  Bindings ptrs = forward_bindings(q, k, v, out, stats, nullptr);
  bind_ragged(g, g_shape, starts, lens, seq, rows_in_call, ptrs, stream_);
  bind_bias_and_sinks(g, g_shape, ptrs, stream_);
  execute(handle_, g, ptrs, g.ragged_workspace);
}

// A padded or staged batch runs as one ragged call where its graph finalizes: each sequence read and written in
// place at its offset, so no staging copies, and a padded query row costs nothing (the padded graph runs every
// query row of the bucket against the valid keys: 2 × 16384 rows of which 8192 valid took 2.9× 2 × 8192 on the H200).
// The stats go through the workspace where the bucket is longer than the sequence.
bool CudnnAttention::ragged_batch_forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* q,
                                          const __nv_bfloat16* k, const __nv_bfloat16* v, const AttnShape& s,
                                          const AttnShape& bucket) {
  const int64_t b = s.batch, S = s.seq, Sp = bucket.seq, h = s.n_heads;
  const int64_t need = ragged_forward_bytes(bucket, b * S, Sp != S);
  if (need < 0) return false;
  Graph& g = graph(false, bucket, true, true, true, true);
  if (!reserve_bytes(g, need)) return false;
  float* stats = Sp != S ? static_cast<float*>(workspace_) : lse;
  ragged_forward(out, stats, q, k, v, bucket, nullptr, s.seq_lens, S, b * S);
  if (Sp != S) restride_rows(lse, stats, b * h, Sp, S, 4, stream_);
  if (s.seq_lens != nullptr) zero_padded_attention_rows(out, h * s.value_head_dim(), lse, s, stream_);
  return true;
}

CudnnAttention::Graph& CudnnAttention::ragged_backward_graph(const AttnShape& g_shape) {
  return graph(true, g_shape, true, plan_.deterministic_backward(), true, true);
}

// Past head_dim 128 cuDNN 9.14's ragged backward finalizes but its gradients are wrong (12-71 % relative error in the
// op table's head_dim-256 rows, padded, windowed and soft-capped alike; an MHA row's dK and dV NaN, and GQA's full-head
// dK and dV in the workspace, as cudnn-frontend lays out a ragged graph's, change nothing), so those shapes keep the
// padded graph.
constexpr int64_t kRaggedBackwardHeadDim = 128;

int64_t CudnnAttention::ragged_backward_bytes(const AttnShape& g_shape, int64_t rows_in_call) {
  const int64_t width = std::max(g_shape.n_heads, g_shape.n_kv_heads) * g_shape.head_dim;
  if (!plan_.ragged() || !ragged_widths(g_shape) || plan_.backward_tile(g_shape) > 0 ||
      g_shape.head_dim > kRaggedBackwardHeadDim || rows_in_call * width > std::numeric_limits<int32_t>::max())
    return -1;
  const Graph& g = ragged_backward_graph(g_shape);
  if (!g.info.ok) return -1;
  return g.info.workspace_bytes + align_up(g_shape.batch * g_shape.n_heads * g_shape.seq * 4);  // the lse past the plan's
}

float* CudnnAttention::ragged_backward_stats(const AttnShape& g_shape) {
  return reinterpret_cast<float*>(static_cast<char*>(workspace_) + ragged_backward_graph(g_shape).info.workspace_bytes);
}

void CudnnAttention::ragged_backward(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv, const __nv_bfloat16* dout,
                                     const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                     const __nv_bfloat16* out, const AttnShape& g_shape, const int32_t* starts,
                                     const int32_t* lens, int64_t seq, int64_t rows_in_call) {
  Graph& g = ragged_backward_graph(g_shape);
  MT_ASSERT(g.info.ok, "a ragged backward without its graph: ragged_backward_bytes refuses it first");
  char* ws = static_cast<char*>(workspace_);
  Bindings ptrs = backward_bindings(q, k, v, out, dout, ws + g.info.workspace_bytes, dq, dk, dv);
  bind_ragged(g, g_shape, starts, lens, seq, rows_in_call, ptrs, stream_);
  if (g.alibi) ptrs.add(uid_alibi, g_shape.alibi_slopes);
  execute(handle_, g, ptrs, ws);
}

// A staged batch's backward as one ragged call, as ragged_batch_forward: no staging copies of the eight tensors, only
// the lse restrided into the bucket's rows.
bool CudnnAttention::ragged_batch_backward(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv,
                                           const __nv_bfloat16* dout, const __nv_bfloat16* q, const __nv_bfloat16* k,
                                           const __nv_bfloat16* v, const __nv_bfloat16* out, const float* lse,
                                           const AttnShape& s, const AttnShape& bucket) {
  const int64_t b = s.batch, S = s.seq;
  const int64_t need = ragged_backward_bytes(bucket, b * S);
  if (need < 0 || !reserve_bytes(ragged_backward_graph(bucket), need)) return false;
  restride_rows(ragged_backward_stats(bucket), lse, b * s.n_heads, S, bucket.seq, 4, stream_);
  ragged_backward(dq, dk, dv, dout, q, k, v, out, bucket, nullptr, s.seq_lens, S, b * S);
  zero_padded_gradient_rows(dq, dk, dv, s, stream_);
  return true;
}

}  // namespace mt::cuda
