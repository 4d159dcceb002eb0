// cuDNN fused attention (see cudnn_attention.h): the handle, the workspace, a shape's layout and plan, the choice
// between cuDNN and our kernel, and the forward and backward of an unpacked batch (bucket graphs, calls of
// cudnn_backward_batch sequences). The graphs are built in cudnn_attention_graph.cpp, run through
// cudnn_attention_pack.h; the ragged calls, the tiled backward and packed segments have files of their own.
// Invariant: every call's graph is built and its workspace reserved before anything is written.
#include "kernels/attention/cudnn_attention.h"

#include <cudnn.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernels/ops/cuda_check.h"
#include "kernels/attention/cudnn_attention_graph.h"
#include "kernels/attention/cudnn_attention_pack.h"
#include "core/error.h"
#include "core/log.h"

namespace mt::cuda {
namespace {

// A cuDNN status as text, with cuDNN's last error message where it has one.
std::string cudnn_message(cudnnStatus_t st) {
  char last[1024] = {0};
  cudnnGetLastErrorString(last, sizeof last);
  return last[0] != 0 ? MT_FORMAT("{} ({})", cudnnGetErrorString(st), last) : std::string(cudnnGetErrorString(st));
}

}  // namespace

CudnnAttention::CudnnAttention(cudaStream_t stream, Alloc alloc, Free release, const RuntimeSwitches& switches)
    : plan_(switches), stream_(stream), alloc_(std::move(alloc)), free_(std::move(release)) {}

CudnnAttention::~CudnnAttention() {
  graphs_.clear();
  if (workspace_) free_(workspace_);
  if (handle_) cudnnDestroy(static_cast<cudnnHandle_t>(handle_));
}

int64_t CudnnAttention::version() {
  if (!handle_tried_) {
    handle_tried_ = true;
    cudnnHandle_t h = nullptr;
    const cudnnStatus_t st = cudnnCreate(&h);
    if (st != CUDNN_STATUS_SUCCESS) {
      handle_error_ = "cudnnCreate: " + cudnn_message(st);
    } else {
      handle_ = h;
      const cudnnStatus_t ss = cudnnSetStream(h, stream_);
      if (ss != CUDNN_STATUS_SUCCESS) handle_error_ = "cudnnSetStream: " + cudnn_message(ss);
    }
  }
  return handle_ != nullptr && handle_error_.empty() ? static_cast<int64_t>(cudnnGetVersion()) : 0;
}

bool CudnnAttention::reserve_workspace(Graph& g, int64_t staging_bytes) {
  return reserve_bytes(g, g.info.workspace_bytes + staging_bytes);
}

bool CudnnAttention::reserve_bytes(Graph& g, int64_t bytes) {
  if (bytes <= workspace_bytes_) return true;
  if (workspace_) free_(workspace_);
  workspace_ = nullptr;
  workspace_bytes_ = 0;
  try {
    workspace_ = alloc_(bytes);
  } catch (const Error& e) {  // the GPU is full: this shape runs our kernel from now on
    g.info.ok = false;
    g.info.error = fmt::format("workspace of {:.1f} MiB: {}", bytes / 1048576.0, e.what());
    log::warn("attention: cuDNN plan dropped, our kernel runs instead: {}", g.info.error);
    return false;
  }
  workspace_bytes_ = bytes;
  return true;
}

CudnnAttention::Layout CudnnAttention::layout_for(const AttnShape& s) const {
  Layout l{s, s.seq_lens != nullptr, false};
  const int64_t bucket = plan_.seq_bucket(s.seq);
  if (bucket != s.seq) {
    l.shape.seq = bucket;
    l.padded = l.staged = true;
  }
  return l;
}

CudnnPlanInfo CudnnAttention::plan_info(bool backward, const AttnShape& s, bool deterministic) {
  const Layout l = layout_for(s);
  return graph(backward, l.shape, l.padded, deterministic).info;
}

std::vector<CudnnEngineConfig> CudnnAttention::engine_configs(bool backward, const AttnShape& s, bool deterministic) {
  const Layout l = layout_for(s);
  Graph& g = graph(backward, l.shape, l.padded, deterministic);
  if (!g.info.ok) return {};
  return g.sdpa->survey(deterministic || !backward);
}

bool CudnnAttention::use_engine_config(bool backward, const AttnShape& s, bool deterministic,
                                       const CudnnEngineConfig& c) {
  const Layout l = layout_for(s);
  Graph& g = graph(backward, l.shape, l.padded, deterministic);
  if (!g.info.ok) return false;
  std::string why;
  CudnnPlanInfo info = g.info;
  if (!g.sdpa->use_config(c, info, why)) {
    log::debug("attention: engine {} {} does not build: {}", c.engine, c.describe(), why);
    return false;
  }
  g.info = info;
  g.plan_bytes = align_up(info.workspace_bytes);
  g.info.workspace_bytes = g.plan_bytes;
  return true;
}

std::string CudnnEngineConfig::describe() const {
  static const std::map<int64_t, const char*> names{{CUDNN_KNOB_TYPE_SWIZZLE, "SWIZZLE"},
                                                    {CUDNN_KNOB_TYPE_TILE_SIZE, "TILE_SIZE"},
                                                    {CUDNN_KNOB_TYPE_EDGE, "EDGE"},
                                                    {CUDNN_KNOB_TYPE_MULTIPLY, "MULTIPLY"},
                                                    {CUDNN_KNOB_TYPE_SPLIT_K_BUF, "SPLIT_K_BUF"},
                                                    {CUDNN_KNOB_TYPE_TILEK, "TILEK"},
                                                    {CUDNN_KNOB_TYPE_STAGES, "STAGES"},
                                                    {CUDNN_KNOB_TYPE_REDUCTION_MODE, "REDUCTION_MODE"},
                                                    {CUDNN_KNOB_TYPE_SPLIT_K_SLC, "SPLIT_K_SLC"},
                                                    {CUDNN_KNOB_TYPE_IDX_MODE, "IDX_MODE"},
                                                    {CUDNN_KNOB_TYPE_SPECFILT, "SPECFILT"},
                                                    {CUDNN_KNOB_TYPE_KERNEL_CFG, "KERNEL_CFG"},
                                                    {CUDNN_KNOB_TYPE_WORKSPACE, "WORKSPACE"},
                                                    {CUDNN_KNOB_TYPE_TILE_CGA_M, "TILE_CGA_M"},
                                                    {CUDNN_KNOB_TYPE_TILE_CGA_N, "TILE_CGA_N"},
                                                    {CUDNN_KNOB_TYPE_BLOCK_SIZE, "BLOCK_SIZE"},
                                                    {CUDNN_KNOB_TYPE_OCCUPANCY, "OCCUPANCY"},
                                                    {CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD, "ARRAY_SIZE_PER_THREAD"},
                                                    {CUDNN_KNOB_TYPE_SPLIT_COLS, "SPLIT_COLS"},
                                                    {CUDNN_KNOB_TYPE_TILE_ROWS, "TILE_ROWS"},
                                                    {CUDNN_KNOB_TYPE_TILE_COLS, "TILE_COLS"},
                                                    {CUDNN_KNOB_TYPE_LOAD_SIZE, "LOAD_SIZE"},
                                                    {CUDNN_KNOB_TYPE_CTA_COUNT, "CTA_COUNT"},
                                                    {CUDNN_KNOB_TYPE_STREAM_K, "STREAM_K"},
                                                    {CUDNN_KNOB_TYPE_SPLIT_P_SLC, "SPLIT_P_SLC"},
                                                    {CUDNN_KNOB_TYPE_TILE_M, "TILE_M"},
                                                    {CUDNN_KNOB_TYPE_TILE_N, "TILE_N"},
                                                    {CUDNN_KNOB_TYPE_WARP_SPEC_CFG, "WARP_SPEC_CFG"},
                                                    {CUDNN_KNOB_TYPE_SWAP_AB, "SWAP_AB"}};
  std::string out;
  for (const CudnnKnob& k : knobs) {
    const auto it = names.find(k.type);
    out += MT_FORMAT("{}{}={}", out.empty() ? "" : ",",
                     it != names.end() ? std::string(it->second) : MT_FORMAT("knob{}", k.type), k.value);
  }
  return out.empty() ? "(no knobs)" : out;
}

void log_attention_choice(const CudnnAttentionPlan& plan, int64_t limit_bytes) {
  log::info("attention: {}", plan.describe_choice(limit_bytes));
}

bool CudnnAttention::chooses(bool backward, const AttnShape& s, int64_t limit_bytes) {
  const int64_t need = workspace_need(backward, s, limit_bytes);
  if (need < 0) return false;  // the plan did not finalize: logged when it was built
  const AttentionDecision d = plan_.choose(backward, cudnn_attention_gap(s, DType::bf16), need, limit_bytes);
  if (!d.cudnn && refusals_logged_.insert({backward, s.batch, s.seq, limit_bytes}).second)
    log::info("attention {} batch {} seq {}: our kernel ({})", backward ? "backward" : "forward", s.batch, s.seq,
              d.why);
  return d.cudnn;
}

int64_t CudnnAttention::workspace_need(bool backward, const AttnShape& s, int64_t limit_bytes) {
  if (s.segment_batch != nullptr) return segment_workspace_need(backward, segment_calls(backward, s, limit_bytes));
  const int64_t n = backward ? plan_.backward_batch(s, limit_bytes) : s.batch;
  if (n < s.batch) {  // the first call is the largest; the last may be shorter
    const int64_t last = s.batch - (s.batch - 1) / n * n;
    const int64_t first_need = call_workspace_need(true, plan_.backward_call(s, 0, limit_bytes));
    if (first_need < 0 ||
        (last != n && call_workspace_need(true, plan_.backward_call(s, s.batch - last, limit_bytes)) < 0))
      return -1;
    return first_need;
  }
  return call_workspace_need(backward, s);
}

int64_t CudnnAttention::call_workspace_need(bool backward, const AttnShape& s) {
  if (const int64_t T = backward ? plan_.backward_tile(s) : 0; T > 0) return tile_graphs(s, T).workspace_bytes;
  const Layout l = layout_for(s);
  const int64_t rows = s.batch * s.seq;
  if (const int64_t ragged = !l.padded  ? -1
                             : backward ? (l.staged ? ragged_backward_bytes(l.shape, rows) : -1)
                                        : ragged_forward_bytes(l.shape, rows, l.staged);
      ragged >= 0)
    return ragged;
  const Graph& g = graph(backward, l.shape, l.padded, plan_.deterministic_backward());  // the forward's ignores it
  return g.info.ok ? g.info.workspace_bytes + plan_.staging_bytes(backward, s) : -1;
}

bool CudnnAttention::forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* q, const __nv_bfloat16* k,
                             const __nv_bfloat16* v, const AttnShape& s, int64_t limit_bytes) {
  if (s.segment_batch != nullptr) return segment_forward(out, lse, q, k, v, s, limit_bytes);
  const Layout l = layout_for(s);
  if (l.padded && ragged_batch_forward(out, lse, q, k, v, s, l.shape)) return true;
  return bucket_forward(out, lse, q, k, v, s);
}

bool CudnnAttention::bucket_forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* q, const __nv_bfloat16* k,
                                    const __nv_bfloat16* v, const AttnShape& s) {
  const Layout l = layout_for(s);
  Graph& g = graph(false, l.shape, l.padded, true);
  const int64_t b = s.batch, S = s.seq, Sp = l.shape.seq, h = s.n_heads, hk = s.n_kv_heads, d = s.head_dim;
  const int64_t vd = s.value_head_dim();
  const int64_t q_bytes = align_up(b * Sp * h * d * 2), kv_bytes = align_up(b * Sp * hk * d * 2);
  const int64_t o_bytes = align_up(b * Sp * h * vd * 2), v_bytes = align_up(b * Sp * hk * vd * 2);
  const int64_t stats_bytes = align_up(b * h * Sp * 4);
  const int64_t staging = plan_.staging_bytes(false, s);
  if (!g.info.ok || !reserve_workspace(g, staging)) return false;
  char* ws = static_cast<char*>(workspace_);
  const void *q_in = q, *k_in = k, *v_in = v, *lens = s.seq_lens;
  void *o_out = out, *stats_out = lse;
  if (l.staged) {  // rows [S, Sp) of every sequence are padding: 0 in, masked by the lengths
    char* st = ws + g.info.workspace_bytes;
    char *sq = st, *sk = sq + q_bytes, *sv = sk + kv_bytes, *so = sv + v_bytes, *sstats = so + o_bytes;
    int32_t* slens = reinterpret_cast<int32_t*>(sstats + stats_bytes);
    restride_rows(sq, q, b, S, Sp, h * d * 2, stream_);
    restride_rows(sk, k, b, S, Sp, hk * d * 2, stream_);
    restride_rows(sv, v, b, S, Sp, hk * vd * 2, stream_);
    if (lens == nullptr) {
      fill_ints(slens, b, static_cast<int32_t>(S), stream_);
      lens = slens;
    }
    q_in = sq, k_in = sk, v_in = sv, o_out = so, stats_out = sstats;
  }
  Bindings ptrs = forward_bindings(q_in, k_in, v_in, o_out, stats_out, g.padding ? lens : nullptr);
  bind_bias_and_sinks(g, s, ptrs, stream_);
  execute(handle_, g, ptrs, ws);
  if (l.staged) {
    restride_rows(out, o_out, b, Sp, S, h * vd * 2, stream_);
    restride_rows(lse, stats_out, b * h, Sp, S, 4, stream_);
  }
  if (s.seq_lens != nullptr) zero_padded_attention_rows(out, h * vd, lse, s, stream_);
  return true;
}

// The backward in calls of cudnn_backward_batch sequences (one call where the batch fits), each
// sequence's rows at its offset; every call's graph is built (workspace_need) before the first runs, and the first
// (largest) call's workspace serves the rest, so that a refusal comes before anything is written.
bool CudnnAttention::backward(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv, const __nv_bfloat16* dout,
                              const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                              const __nv_bfloat16* out, const float* lse, const AttnShape& s, int64_t limit_bytes) {
  if (s.segment_batch != nullptr) return segment_backward(dq, dk, dv, dout, q, k, v, out, lse, s, limit_bytes);
  const int64_t per_call = plan_.backward_batch(s, limit_bytes);
  if (per_call >= s.batch) return backward_call(dq, dk, dv, dout, q, k, v, out, lse, s);
  if (workspace_need(true, s, limit_bytes) < 0) return false;
  const int64_t q_row = s.seq * s.n_heads * s.head_dim, kv_row = s.seq * s.n_kv_heads * s.head_dim;
  const int64_t o_row = s.seq * s.n_heads * s.value_head_dim(), v_row = s.seq * s.n_kv_heads * s.value_head_dim();
  const int64_t lse_row = s.n_heads * s.seq;
  for (int64_t b0 = 0; b0 < s.batch; b0 += per_call) {
    const int64_t qo = b0 * q_row, kvo = b0 * kv_row, oo = b0 * o_row, vo = b0 * v_row;
    const bool ran = backward_call(dq + qo, dk + kvo, dv + vo, dout + oo, q + qo, k + kvo, v + vo, out + oo,
                                   lse + b0 * lse_row, plan_.backward_call(s, b0, limit_bytes));
    if (!ran && b0 == 0) return false;  // its workspace could not be allocated: nothing has run
    MT_ASSERT(ran, "cuDNN attention's backward call at sequence {} of {} refused after the first ran", b0, s.batch);
  }
  return true;
}

bool CudnnAttention::backward_call(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv, const __nv_bfloat16* dout,
                                   const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                   const __nv_bfloat16* out, const float* lse, const AttnShape& s) {
  if (const int64_t T = plan_.backward_tile(s); T > 0) return tiled_backward(dq, dk, dv, dout, q, k, v, out, lse, s, T);
  const Layout l = layout_for(s);
  if (l.staged && ragged_batch_backward(dq, dk, dv, dout, q, k, v, out, lse, s, l.shape)) return true;
  Graph& g = graph(true, l.shape, l.padded, plan_.deterministic_backward());
  const int64_t b = s.batch, S = s.seq, Sp = l.shape.seq, h = s.n_heads, hk = s.n_kv_heads, d = s.head_dim;
  const int64_t vd = s.value_head_dim();
  const int64_t q_bytes = align_up(b * Sp * h * d * 2), kv_bytes = align_up(b * Sp * hk * d * 2);
  const int64_t o_bytes = align_up(b * Sp * h * vd * 2), v_bytes = align_up(b * Sp * hk * vd * 2);
  const int64_t stats_bytes = align_up(b * h * Sp * 4);
  const int64_t staging = plan_.staging_bytes(true, s);
  if (!g.info.ok || !reserve_workspace(g, staging)) return false;
  char* ws = static_cast<char*>(workspace_);
  const void *q_in = q, *k_in = k, *v_in = v, *o_in = out, *do_in = dout, *stats_in = lse;
  const void* lens = s.seq_lens;
  void *dq_out = dq, *dk_out = dk, *dv_out = dv;
  if (l.staged) {  // as forward: inputs into the bucket's layout (pad rows 0, pad lse 0), gradients back out
    char* st = ws + g.info.workspace_bytes;
    char *sq = st, *so = sq + q_bytes, *sdo = so + o_bytes, *sdq = sdo + o_bytes, *sk = sdq + q_bytes;
    char *sv = sk + kv_bytes, *sdk = sv + v_bytes, *sdv = sdk + kv_bytes, *sstats = sdv + v_bytes;
    int32_t* slens = reinterpret_cast<int32_t*>(sstats + stats_bytes);
    restride_rows(sq, q, b, S, Sp, h * d * 2, stream_);
    restride_rows(so, out, b, S, Sp, h * vd * 2, stream_);
    restride_rows(sdo, dout, b, S, Sp, h * vd * 2, stream_);
    restride_rows(sk, k, b, S, Sp, hk * d * 2, stream_);
    restride_rows(sv, v, b, S, Sp, hk * vd * 2, stream_);
    restride_rows(sstats, lse, b * h, S, Sp, 4, stream_);
    if (s.seq_lens == nullptr) {
      fill_ints(slens, b, static_cast<int32_t>(S), stream_);
      lens = slens;
    }
    q_in = sq, k_in = sk, v_in = sv, o_in = so, do_in = sdo, stats_in = sstats;
    dq_out = sdq, dk_out = sdk, dv_out = sdv;
  }
  Bindings ptrs = backward_bindings(q_in, k_in, v_in, o_in, do_in, stats_in, dq_out, dk_out, dv_out);
  if (g.padding) {
    ptrs.add(uid_seq_q, lens);
    ptrs.add(uid_seq_kv, lens);
  }
  if (g.alibi) ptrs.add(uid_alibi, s.alibi_slopes);
  execute(handle_, g, ptrs, ws);
  if (l.staged) {
    restride_rows(dq, dq_out, b, Sp, S, h * d * 2, stream_);
    restride_rows(dk, dk_out, b, Sp, S, hk * d * 2, stream_);
    restride_rows(dv, dv_out, b, Sp, S, hk * vd * 2, stream_);
  }
  zero_padded_gradient_rows(dq, dk, dv, s, stream_);
  return true;
}

}  // namespace mt::cuda
