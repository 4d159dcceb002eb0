// The variant pack (see cudnn_attention_pack.h).
#include "kernels/attention/cudnn_attention_pack.h"

#include <unordered_map>

#include "kernels/ops/kernels.h"

namespace mt::cuda {

void execute(void* handle, const CudnnAttention::Graph& g, const Bindings& b, void* workspace) {
  std::unordered_map<int64_t, void*> pack;
  for (size_t e = 0; e < b.uids.size(); ++e) pack[b.uids[e]] = b.ptrs[e];
  g.sdpa->execute(static_cast<cudnnHandle_t>(handle), pack, workspace);
}

Bindings forward_bindings(const void* q, const void* k, const void* v, void* out, void* stats, const void* lens) {
  Bindings ptrs;
  ptrs.add(uid_q, q);
  ptrs.add(uid_k, k);
  ptrs.add(uid_v, v);
  ptrs.add(uid_o, out);
  ptrs.add(uid_stats, stats);
  if (lens != nullptr) {
    ptrs.add(uid_seq_q, lens);
    ptrs.add(uid_seq_kv, lens);
  }
  return ptrs;
}

Bindings backward_bindings(const void* q, const void* k, const void* v, const void* out, const void* dout,
                           const void* stats, void* dq, void* dk, void* dv) {
  Bindings ptrs;
  const int64_t uids[] = {uid_q, uid_k, uid_v, uid_o, uid_do, uid_stats, uid_dq, uid_dk, uid_dv};
  const void* data[] = {q, k, v, out, dout, stats, dq, dk, dv};
  for (int e = 0; e < 9; ++e) ptrs.add(uids[e], data[e]);
  return ptrs;
}

void bind_bias_and_sinks(const CudnnAttention::Graph& g, const AttnShape& s, Bindings& ptrs, cudaStream_t stream) {
  if (g.alibi) ptrs.add(uid_alibi, s.alibi_slopes);
  if (g.sinks != nullptr) {
    cast<float, __nv_bfloat16>(g.sinks, static_cast<const __nv_bfloat16*>(s.sinks), s.n_heads, stream);
    ptrs.add(uid_sinks, g.sinks);
  }
}

void bind_ragged(const CudnnAttention::Graph& g, const AttnShape& g_shape, const int32_t* starts, const int32_t* lens,
                 int64_t seq, int64_t rows_in_call, Bindings& ptrs, cudaStream_t stream) {
  ragged_offsets(g.q_offsets(), g.kv_offsets(), g.ragged_lens(), starts, lens, g_shape.batch, seq,
                 g_shape.n_heads * g_shape.head_dim, g_shape.n_kv_heads * g_shape.head_dim, rows_in_call, stream);
  ptrs.add(uid_seq_q, g.ragged_lens());
  ptrs.add(uid_seq_kv, g.ragged_lens());
  ptrs.add(uid_q_ragged, g.q_offsets());
  ptrs.add(uid_kv_ragged, g.kv_offsets());
}

}  // namespace mt::cuda
