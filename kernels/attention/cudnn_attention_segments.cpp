// Packed segments and Llama 4's chunks on cuDNN (see cudnn_attention.h, backend/segment_batch.h): each length
// class's group run as a virtual batch, ragged in place or gathered into the workspace past its graph's and
// scattered back. Invariant: every call's graph is built and the workspace grown to the largest before the first
// call runs, and the workspace never outgrows what the memory plan reserved.
#include <algorithm>
#include <optional>
#include <vector>

#include "kernels/attention/cudnn_attention.h"
#include "kernels/attention/cudnn_attention_graph.h"
#include "kernels/attention/cudnn_attention_pack.h"
#include "core/error.h"

namespace mt::cuda {
namespace {

// Consecutive pieces of the workspace, each 256-byte aligned.
struct Carver {
  char* at;
  template <typename T>
  T* take(int64_t elements) {
    T* p = reinterpret_cast<T*>(at);
    at += align_up(elements * static_cast<int64_t>(sizeof(T)));
    return p;
  }
};

}  // namespace

std::vector<CudnnAttention::SegmentCall> CudnnAttention::segment_calls(bool backward, const AttnShape& s,
                                                                       int64_t limit_bytes) {
  std::vector<SegmentCall> calls;
  int64_t planned = 0;  // the most the plan's formula counts for a call
  for (const SegmentGroup& g : s.segment_batch->groups) {
    const AttnShape v = plan_.segment_group_shape(s, g);
    const int64_t per_call = plan_.segment_call_batch(backward, v, limit_bytes);
    for (int64_t b0 = 0; b0 < v.batch; b0 += per_call) {
      AttnShape c = v;
      c.batch = std::min(per_call, v.batch - b0);
      c.seq_lens = v.seq_lens + b0;
      calls.push_back({c, s.segment_batch->starts + g.first + b0});
      planned = std::max(planned, plan_.segment_call_bytes(backward, c, c.batch));
    }
  }
  const int64_t rows_in_call = s.batch * s.seq;
  for (SegmentCall& c : calls) {
    const int64_t ragged =
        backward ? ragged_backward_bytes(c.shape, rows_in_call) : ragged_forward_bytes(c.shape, rows_in_call, true);
    c.ragged_bytes = ragged <= planned ? ragged : -1;
  }
  return calls;
}

int64_t CudnnAttention::segment_graph_bytes(bool backward, const AttnShape& call) {
  if (backward) return call_workspace_need(true, call);
  const Graph& g = graph(false, call, true, true);  // the padded graph, at the class's (bucket) length
  return g.info.ok ? g.info.workspace_bytes : -1;
}

int64_t CudnnAttention::segment_workspace_need(bool backward, const std::vector<SegmentCall>& calls) {
  int64_t most = 0;
  for (const SegmentCall& c : calls) {
    if (c.ragged_bytes >= 0) {
      most = std::max(most, c.ragged_bytes);
      continue;
    }
    const int64_t graph_bytes = segment_graph_bytes(backward, c.shape);
    if (graph_bytes < 0) return -1;
    most = std::max(most, graph_bytes + cudnn_segment_staging_bytes(backward, c.shape));
  }
  return most;
}

std::optional<std::vector<CudnnAttention::SegmentCall>> CudnnAttention::reserved_segment_calls(bool backward,
                                                                                               const AttnShape& s,
                                                                                               int64_t limit_bytes) {
  std::vector<SegmentCall> calls = segment_calls(backward, s, limit_bytes);
  const int64_t need = segment_workspace_need(backward, calls);
  if (need < 0) return std::nullopt;
  if (!calls.empty()) {  // the plan a failed allocation drops: the first call's (a forward's ignores determinism)
    const bool ragged = calls[0].ragged_bytes >= 0;
    if (!reserve_bytes(graph(backward, calls[0].shape, true, plan_.deterministic_backward(), true, ragged), need))
      return std::nullopt;
  }
  return calls;
}

// Each call's rows lie past its own graph's workspace; a call whose ragged graph runs reads and writes the packed rows
// in place.
bool CudnnAttention::segment_forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* q, const __nv_bfloat16* k,
                                     const __nv_bfloat16* v, const AttnShape& s, int64_t limit_bytes) {
  using bf = __nv_bfloat16;
  const std::optional<std::vector<SegmentCall>> calls = reserved_segment_calls(false, s, limit_bytes);
  if (!calls) return false;
  const int64_t rows_in_call = s.batch * s.seq;
  const int64_t qw = s.n_heads * s.head_dim, kw = s.n_kv_heads * s.head_dim, h = s.n_heads;
  const int64_t ow = s.n_heads * s.value_head_dim(), vw = s.n_kv_heads * s.value_head_dim();
  for (const SegmentCall& c : *calls) {
    const int64_t n = c.shape.batch, L = c.shape.seq, rows = n * L;
    const int32_t* lens = c.shape.seq_lens;
    if (c.ragged_bytes >= 0) {  // each segment read and written in place
      float* vlse = static_cast<float*>(workspace_);
      ragged_forward(out, vlse, q, k, v, c.shape, c.starts, lens, L, rows_in_call);
      scatter_segment_lse(lse, vlse, c.starts, lens, n, h, L, s.seq, stream_);
      continue;
    }
    Carver ws{static_cast<char*>(workspace_) + segment_graph_bytes(false, c.shape)};
    bf *vq = ws.take<bf>(rows * qw), *vo = ws.take<bf>(rows * ow), *vk = ws.take<bf>(rows * kw);
    bf* vv = ws.take<bf>(rows * vw);
    float* vlse = ws.take<float>(n * h * L);
    gather_segment_rows(vq, q, c.starts, lens, n, L, qw * 2, stream_);
    gather_segment_rows(vk, k, c.starts, lens, n, L, kw * 2, stream_);
    gather_segment_rows(vv, v, c.starts, lens, n, L, vw * 2, stream_);
    const bool ran = bucket_forward(vo, vlse, vq, vk, vv, c.shape);
    MT_ASSERT(ran, "cuDNN attention's forward of packed segments refused a call after its plan was built");
    scatter_segment_rows(out, vo, c.starts, lens, n, L, ow * 2, stream_);
    scatter_segment_lse(lse, vlse, c.starts, lens, n, h, L, s.seq, stream_);
  }
  if (s.seq_lens != nullptr) zero_padded_attention_rows(out, ow, lse, s, stream_);
  return true;
}

bool CudnnAttention::segment_backward(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv,
                                      const __nv_bfloat16* dout, const __nv_bfloat16* q, const __nv_bfloat16* k,
                                      const __nv_bfloat16* v, const __nv_bfloat16* out, const float* lse,
                                      const AttnShape& s, int64_t limit_bytes) {
  using bf = __nv_bfloat16;
  const std::optional<std::vector<SegmentCall>> calls = reserved_segment_calls(true, s, limit_bytes);
  if (!calls) return false;
  const int64_t rows_in_call = s.batch * s.seq;
  const int64_t qw = s.n_heads * s.head_dim, kw = s.n_kv_heads * s.head_dim, h = s.n_heads;
  const int64_t ow = s.n_heads * s.value_head_dim(), vw = s.n_kv_heads * s.value_head_dim();
  for (const SegmentCall& c : *calls) {
    const int64_t n = c.shape.batch, L = c.shape.seq, rows = n * L;
    const int32_t* lens = c.shape.seq_lens;
    if (c.ragged_bytes >= 0) {  // each segment read and written in place
      gather_segment_lse(ragged_backward_stats(c.shape), lse, c.starts, lens, n, h, L, s.seq, stream_);
      ragged_backward(dq, dk, dv, dout, q, k, v, out, c.shape, c.starts, lens, L, rows_in_call);
      continue;
    }
    Carver ws{static_cast<char*>(workspace_) + segment_graph_bytes(true, c.shape)};
    bf *vq = ws.take<bf>(rows * qw), *vo = ws.take<bf>(rows * ow), *vdo = ws.take<bf>(rows * ow);
    bf *vdq = ws.take<bf>(rows * qw), *vk = ws.take<bf>(rows * kw), *vv = ws.take<bf>(rows * vw);
    bf *vdk = ws.take<bf>(rows * kw), *vdv = ws.take<bf>(rows * vw);
    float* vlse = ws.take<float>(n * h * L);
    gather_segment_rows(vq, q, c.starts, lens, n, L, qw * 2, stream_);
    gather_segment_rows(vo, out, c.starts, lens, n, L, ow * 2, stream_);
    gather_segment_rows(vdo, dout, c.starts, lens, n, L, ow * 2, stream_);
    gather_segment_rows(vk, k, c.starts, lens, n, L, kw * 2, stream_);
    gather_segment_rows(vv, v, c.starts, lens, n, L, vw * 2, stream_);
    gather_segment_lse(vlse, lse, c.starts, lens, n, h, L, s.seq, stream_);
    const bool ran = backward_call(vdq, vdk, vdv, vdo, vq, vk, vv, vo, vlse, c.shape);
    MT_ASSERT(ran, "cuDNN attention's backward of packed segments refused a call after its plan was built");
    scatter_segment_rows(dq, vdq, c.starts, lens, n, L, qw * 2, stream_);
    scatter_segment_rows(dk, vdk, c.starts, lens, n, L, kw * 2, stream_);
    scatter_segment_rows(dv, vdv, c.starts, lens, n, L, vw * 2, stream_);
  }
  zero_padded_gradient_rows(dq, dk, dv, s, stream_);
  return true;
}

}  // namespace mt::cuda
