// The variant pack (see cudnn_attention_pack.h).
#include "kernels/attention/cudnn_attention_pack.h"

#include <unordered_map>
#include <utility>

#include "kernels/ops/cuda_check.h"
#include "core/error.h"
#include "kernels/ops/kernels.h"

#define MT_CHECK_CUDNN(call) \
  MT_CHECK_CALL(throw_error, "cuDNN", call, mt_rc_ == CUDNN_STATUS_SUCCESS, cudnn_message(mt_rc_))

namespace mt::cuda {

void execute(void* handle, const CudnnAttention::Graph& g, Bindings b, void* workspace) {
  if (g.sdpa) {  // the frontend's graph holds its side tensors in its workspace: our softmax sum's binding is dropped
    std::unordered_map<int64_t, void*> pack;
    for (size_t e = 0; e < b.uids.size(); ++e)
      if (b.uids[e] != uid_softmax_sum) pack[b.uids[e]] = b.ptrs[e];
    g.sdpa->execute(static_cast<cudnnHandle_t>(handle), pack, workspace);
    return;
  }
  for (const CudnnScalar& sc : g.builder->scalars()) b.add(sc.uid, sc.value);
  cudnnBackendDescriptor_t pack = nullptr;
  MT_CHECK_CUDNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack));
  struct Destroy {
    cudnnBackendDescriptor_t d;
    ~Destroy() { cudnnBackendDestroyDescriptor(d); }
  } destroy{pack};
  const auto n = static_cast<int64_t>(b.uids.size());
  MT_CHECK_CUDNN(
      cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, b.uids.data()));
  MT_CHECK_CUDNN(
      cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, b.ptrs.data()));
  MT_CHECK_CUDNN(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace));
  MT_CHECK_CUDNN(cudnnBackendFinalize(pack));
  MT_CHECK_CUDNN(cudnnBackendExecute(static_cast<cudnnHandle_t>(handle), g.plan, pack));
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
                           const void* stats, void* dq, void* dk, void* dv, void* softmax_sum) {
  Bindings ptrs;
  const int64_t uids[] = {uid_q, uid_k, uid_v, uid_o, uid_do, uid_stats, uid_dq, uid_dk, uid_dv, uid_softmax_sum};
  const void* data[] = {q, k, v, out, dout, stats, dq, dk, dv, softmax_sum};
  for (int e = 0; e < 10; ++e) ptrs.add(uids[e], data[e]);
  return ptrs;
}

void bind_bias_and_sinks(const CudnnAttention::Graph& g, const AttnShape& s, Bindings& ptrs, cudaStream_t stream) {
  if (g.alibi) ptrs.add(uid_alibi, s.alibi_slopes);
  if (g.sinks != nullptr) {
    cast<float, __nv_bfloat16>(g.sinks, static_cast<const __nv_bfloat16*>(s.sinks), s.n_heads, stream);
    ptrs.add(uid_sinks, g.sinks);
  }
}

void bind_dq_accum(const CudnnAttention::Graph& g, int64_t bytes, char* ws, int64_t version, Bindings& ptrs,
                   cudaStream_t stream) {
  if (bytes == 0) return;
  void* acc = ws + g.plan_bytes + g.side.softmax_sum_bytes;
  if (version < 90600) MT_CHECK_CUDA(cudaMemsetAsync(acc, 0, static_cast<size_t>(bytes), stream));
  ptrs.add(uid_dq_accum, acc);
}

int64_t ragged_dq_accum_bytes(const CudnnAttention::Graph& g, const AttnShape& g_shape, int64_t rows_in_call) {
  return g.side.ragged_dq_accum ? align_up(rows_in_call * g_shape.n_heads * g_shape.head_dim * 4) : 0;
}

int64_t ragged_stats_offset(const CudnnAttention::Graph& g, const AttnShape& g_shape, int64_t rows_in_call) {
  return g.info.workspace_bytes + ragged_dq_accum_bytes(g, g_shape, rows_in_call);
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
