// cuDNN fused attention through the backend graph API (see cudnn_attention.h): graphs, plans, execution. The operation
// graphs are the runtime fusion engine's "fused flash attention" fprop and bprop patterns, op for op as
// cudnn-frontend's composite SDPA nodes lower them (matmul, scale, the soft-cap score modifier div / tanh / mul,
// ALiBi's gen_index / sub / mul by the slopes / add, padding / causal / left-bound masks as gen_index + cmp +
// binary_select, softmax through max/sum reductions with the stats out and a sink joining the max and the sum, matmul;
// bprop: dO·O row sums, the recomputed probabilities, dV, dP, dS with the soft-cap's mul / tanh_bwd / div, dK, dQ, GQA
// head reductions), each built by a CudnnGraphBuilder (cudnn_graph_builder.h). Invariant: a graph that fails is
// remembered with its first failure and never retried.
#include "backend/cuda/cudnn_attention.h"

#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cudnn_graph_builder.h"
#include "core/error.h"
#include "core/log.h"
#include "kernels/kernels.h"

#define MT_CHECK_CUDNN(call) \
  MT_CHECK_CALL(throw_error, "cuDNN", call, mt_rc_ == CUDNN_STATUS_SUCCESS, cudnn_message(mt_rc_))

namespace mt::cuda {
namespace {

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

float default_scale(const AttnShape& s) {
  return s.scale > 0.f ? s.scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
}

int64_t effective_window(const AttnShape& s) { return s.window > 0 && s.window < s.seq ? s.window : 0; }

constexpr int64_t align_up(int64_t n) { return (n + 255) / 256 * 256; }

// The most plan workspace a ragged forward's graph holds itself (Graph::ragged_workspace); a larger one is refused.
constexpr int64_t kRaggedPlanBytes = int64_t{1} << 20;

}  // namespace

struct CudnnAttention::Graph {
  Key key;
  CudnnPlanInfo info;
  std::unique_ptr<CudnnGraphBuilder> builder;
  cudnnBackendDescriptor_t plan = nullptr;
  int64_t plan_bytes = 0, softmax_sum_bytes = 0, dq_accum_bytes = 0;
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
  // A ragged non-deterministic backward: its fp32 dQ accumulator is the call's rows at dQ's offsets (as
  // cudnn-frontend's THD accumulator), so its bytes are the call's (ragged_dq_accum_bytes), not the graph's
  // (dq_accum_bytes 0).
  bool ragged_dq_accum = false;
  Free release;
  ~Graph() {
    if (full_lens) release(full_lens);
    if (sinks) release(sinks);
    if (ragged_ints) release(ragged_ints);
  }
};

CudnnAttention::CudnnAttention(cudaStream_t stream, Alloc alloc, Free release)
    : stream_(stream), alloc_(std::move(alloc)), free_(std::move(release)) {}

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

CudnnAttention::Graph& CudnnAttention::graph(bool backward, const AttnShape& s, bool padded, bool deterministic,
                                             bool causal, bool ragged) {
  MT_ASSERT(!ragged || padded, "a ragged graph has the padding mask");
  uint32_t scale_bits = 0, softcap_bits = 0;
  const float scale = default_scale(s);
  std::memcpy(&scale_bits, &scale, sizeof scale);
  std::memcpy(&softcap_bits, &s.softcap, sizeof s.softcap);
  const bool sinks = !backward && s.sinks != nullptr;  // the backward's graph is the same with sinks or without
  const Key key{backward ? (deterministic ? 2 : 1) : 0,
                s.batch,
                s.seq,
                s.n_heads,
                s.n_kv_heads,
                s.head_dim,
                effective_window(s),
                scale_bits,
                softcap_bits,
                padded,
                causal,
                sinks,
                s.alibi_slopes != nullptr,
                ragged};
  for (const auto& g : graphs_)
    if (g->key == key) return *g;
  const auto started = std::chrono::steady_clock::now();
  graphs_.push_back(std::make_unique<Graph>());
  Graph& gr = *graphs_.back();
  gr.key = key;
  gr.release = free_;
  const std::string gap = cudnn_attention_gap(s, DType::bf16);
  const int64_t ver = version();
  if (!gap.empty()) {
    gr.info.error = "not covered: " + gap;
  } else if (ver == 0) {
    gr.info.error = handle_error_;
  } else if (const std::string too_old = cudnn_version_gap(s, backward, ver); !too_old.empty()) {
    gr.info.error = too_old;
  } else {
    const int64_t b = s.batch, S = s.seq, h = s.n_heads, hk = s.n_kv_heads, d = s.head_dim;
    const int64_t window = effective_window(s);
    // cudnn-frontend's workaround (cuDNN <= 9.15, bprop): a padding mask of full lengths when seq % 128 != 0.
    const bool workaround = backward && !padded && S % 128 != 0 && ver <= 91500;
    gr.padding = padded || workaround;
    gr.alibi = s.alibi_slopes != nullptr;
    // Scalars as cudnn-frontend makes them (dims {1}); should this cuDNN refuse the graph, once more with {1,1,1,1}.
    std::string errors;
    for (const int scalar_rank : {1, 4}) {
      gr.softmax_sum_bytes = gr.dq_accum_bytes = 0;
      gr.info = CudnnPlanInfo{};
      gr.builder = std::make_unique<CudnnGraphBuilder>(static_cast<cudnnHandle_t>(handle_), scalar_rank);
      CudnnGraphBuilder& B = *gr.builder;
      const auto f32 = CUDNN_DATA_FLOAT, bf = CUDNN_DATA_BFLOAT16, i32 = CUDNN_DATA_INT32, bl = CUDNN_DATA_BOOLEAN;
      const std::vector<int64_t> q_dims{b, h, S, d}, q_strides{S * h * d, d, h * d, 1};
      const std::vector<int64_t> kv_dims{b, hk, S, d}, kv_strides{S * hk * d, d, hk * d, 1};
      const std::vector<int64_t> kt_dims{b, hk, d, S}, kt_strides{S * hk * d, d, 1, hk * d};
      const std::vector<int64_t> s_dims{b, h, S, S}, s_strides{h * S * S, S * S, S, 1};
      const std::vector<int64_t> st_strides{h * S * S, S * S, 1, S};  // the transposed view of an S×S tile
      const std::vector<int64_t> row_dims{b, h, S, 1}, row_strides{h * S, S, 1, 1};
      const float neg_inf =
          ver < 91000 ? std::numeric_limits<float>::lowest() : -std::numeric_limits<float>::infinity();

      // Ragged: each sequence's rows of Q, O, dO and dQ, of K, V, dK and dV start at its offset, not at b·seq rows
      // (the stats and softmax_sum stay [b, h, S, 1]).
      const int64_t q_ragged = ragged ? B.io(uid_q_ragged, "Q/O offsets", i32, {b + 1, 1, 1, 1}, {1, 1, 1, 1}) : -1;
      const int64_t kv_ragged = ragged ? B.io(uid_kv_ragged, "K/V offsets", i32, {b + 1, 1, 1, 1}, {1, 1, 1, 1}) : -1;
      const int64_t Q = B.io(uid_q, "Q", bf, q_dims, q_strides, q_ragged);
      const int64_t KT = B.io(uid_k, "K^T", bf, kt_dims, kt_strides, kv_ragged);
      const int64_t stats = B.io(uid_stats, "stats (lse)", f32, row_dims, row_strides);
      const int64_t seq_q = gr.padding ? B.io(uid_seq_q, "seq_len_q", i32, {b, 1, 1, 1}, {1, 1, 1, 1}) : -1;
      const int64_t seq_kv = gr.padding ? B.io(uid_seq_kv, "seq_len_kv", i32, {b, 1, 1, 1}, {1, 1, 1, 1}) : -1;
      const int64_t attn_scale = B.scalar_f32("attn_scale", scale);
      const int64_t cap_scalar = s.softcap > 0.f ? B.scalar_f32("soft_cap", s.softcap) : -1;
      int64_t before_tanh = -1;  // scores / softcap: the tanh's input, which the backward's derivative reads again
      auto minus_inf = [&] { return B.scalar_f32("-inf", neg_inf); };  // one per mask, as cudnn-frontend has them

      auto padding_mask = [&](int64_t x, const std::string& tag) {
        const int64_t row = B.virt(tag + " row index", i32, x), col = B.virt(tag + " col index", i32, x);
        B.pointwise(tag + " gen_row_idx", CUDNN_POINTWISE_GEN_INDEX, x, -1, -1, row, i32, 2);
        B.pointwise(tag + " gen_col_idx", CUDNN_POINTWISE_GEN_INDEX, x, -1, -1, col, i32, 3);
        const int64_t rm = B.virt(tag + " row < seq_len_q", bl, x), cm = B.virt(tag + " col < seq_len_kv", bl, x);
        B.pointwise(tag + " lt_row_sq", CUDNN_POINTWISE_CMP_LT, row, seq_q, -1, rm, bl);
        B.pointwise(tag + " lt_col_skv", CUDNN_POINTWISE_CMP_LT, col, seq_kv, -1, cm, bl);
        const int64_t both = B.virt(tag + " and", bl, x);
        B.pointwise(tag + " and_row_col", CUDNN_POINTWISE_LOGICAL_AND, rm, cm, -1, both, bl);
        const int64_t y = B.virt(tag + " masked", f32, x);
        B.pointwise(tag + " select", CUDNN_POINTWISE_BINARY_SELECT, x, minus_inf(), both, y);
        return y;
      };
      // Causal: keep row >= col (the diagonal band's right bound 0, top-left aligned); window w: keep col + w > row.
      auto band_masks = [&](int64_t x) {
        if (!causal) return x;  // a tile below the diagonal: every pair is kept
        const int64_t row = B.virt("causal row index", i32, x), col = B.virt("causal col index", i32, x);
        B.pointwise("causal gen_row_index", CUDNN_POINTWISE_GEN_INDEX, x, -1, -1, row, f32, 2);
        B.pointwise("causal gen_col_index", CUDNN_POINTWISE_GEN_INDEX, x, -1, -1, col, f32, 3);
        const int64_t keep = B.virt("row >= col", bl, x);
        B.pointwise("causal row>=col", CUDNN_POINTWISE_CMP_GE, row, col, -1, keep, bl);
        int64_t y = B.virt("causal masked", f32, x);
        B.pointwise("causal binary_select", CUDNN_POINTWISE_BINARY_SELECT, x, minus_inf(), keep, y);
        if (window > 0) {
          const int64_t wrow = B.virt("window row index", i32, y), wcol = B.virt("window col index", i32, y);
          B.pointwise("window gen_row_index", CUDNN_POINTWISE_GEN_INDEX, y, -1, -1, wrow, f32, 2);
          B.pointwise("window gen_col_index", CUDNN_POINTWISE_GEN_INDEX, y, -1, -1, wcol, f32, 3);
          const int64_t left = B.scalar_f32("window (left bound)", static_cast<float>(window));
          const int64_t shifted = B.virt("col + window", f32, y);
          B.pointwise("window col+window", CUDNN_POINTWISE_ADD, wcol, left, -1, shifted, f32);
          const int64_t wkeep = B.virt("col + window > row", bl, y);
          B.pointwise("window col+window>row", CUDNN_POINTWISE_CMP_GT, shifted, wrow, -1, wkeep, bl);
          const int64_t z = B.virt("window masked", f32, y);
          B.pointwise("window binary_select", CUDNN_POINTWISE_BINARY_SELECT, y, minus_inf(), wkeep, z);
          y = z;
        }
        return y;
      };
      // ALiBi (Baichuan 2) as cudnn-frontend's alibi_mask lowers it: slope_h · (col − row) added to the scores, the
      // index difference in int32, the slopes an fp32 [1, h, 1, 1] input.
      auto alibi_bias = [&](int64_t x, const std::string& tag) {
        const int64_t slopes = B.io(uid_alibi, "alibi slopes", f32, {1, h, 1, 1}, {h, 1, 1, 1});
        const int64_t row = B.virt(tag + " alibi row index", i32, x), col = B.virt(tag + " alibi col index", i32, x);
        B.pointwise(tag + " gen_row_idx_alibi", CUDNN_POINTWISE_GEN_INDEX, x, -1, -1, row, i32, 2);
        B.pointwise(tag + " gen_col_idx_alibi", CUDNN_POINTWISE_GEN_INDEX, x, -1, -1, col, i32, 3);
        const int64_t rel = B.virt(tag + " alibi col - row", i32, x);
        B.pointwise(tag + " sub_col_row_alibi", CUDNN_POINTWISE_SUB, col, row, -1, rel, i32);
        const int64_t bias = B.virt(tag + " alibi bias", f32, x);
        B.pointwise(tag + " mul_slope_alibi", CUDNN_POINTWISE_MUL, rel, slopes, -1, bias);
        const int64_t y = B.virt(tag + " with alibi", f32, x);
        B.pointwise(tag + " add_alibi", CUDNN_POINTWISE_ADD, x, bias, -1, y);
        return y;
      };
      // Gemma 2's soft-cap softcap·tanh(x / softcap), as cudnn-frontend's Softcap score modifier lowers it: the
      // score modifier sits between the scale and the masks (tanh first, so masked logits stay -inf).
      auto soft_cap = [&](int64_t x, const std::string& tag) {
        before_tanh = B.virt(tag + " x / soft_cap", f32, x);
        B.pointwise(tag + " div_by_soft_cap", CUDNN_POINTWISE_DIV, x, cap_scalar, -1, before_tanh);
        const int64_t t = B.virt(tag + " tanh", f32, x);
        B.pointwise(tag + " activation", CUDNN_POINTWISE_TANH_FWD, before_tanh, -1, -1, t);
        const int64_t y = B.virt(tag + " capped", f32, x);
        B.pointwise(tag + " mul_by_soft_cap", CUDNN_POINTWISE_MUL, t, cap_scalar, -1, y);
        return y;
      };
      auto scores = [&](const std::string& tag) {  // scale · Q·Kᵀ, soft-capped, with the padding mask
        const int64_t s0 = B.virt(tag + " Q·K^T", f32, s_dims, s_strides);
        B.matmul(tag + " bmm1 Q·K^T", Q, KT, s0, seq_q, seq_kv, -1);
        int64_t s1 = B.virt(tag + " scaled", f32, s0);
        B.pointwise(tag + " attn_scale", CUDNN_POINTWISE_MUL, s0, attn_scale, -1, s1);
        if (cap_scalar >= 0) s1 = soft_cap(s1, tag);
        if (gr.alibi) s1 = alibi_bias(s1, tag);  // after the soft-cap, as the CPU reference adds it
        return gr.padding ? padding_mask(s1, tag + " padding") : s1;
      };

      if (!backward) {
        const int64_t V = B.io(uid_v, "V", bf, kv_dims, kv_strides, kv_ragged);
        const int64_t O = B.io(uid_o, "O", bf, q_dims, q_strides, q_ragged);
        const int64_t x = band_masks(scores("fprop"));
        // With sinks (cudnn-frontend's softmax with a sink): max = MAX(max of the row, sink), and the row's sum of
        // exp(x − max) plus exp(sink − max), so that the stats (lse) hold the sink as ours do.
        const int64_t sink = sinks ? B.io(uid_sinks, "sink", f32, {1, h, 1, 1}, {h, 1, 1, 1}) : -1;
        const int64_t m = B.virt("softmax max", f32, row_dims, row_strides);
        if (sinks) {
          const int64_t row_max = B.virt("softmax max of the row", f32, row_dims, row_strides);
          B.reduction("softmax max of the row", CUDNN_REDUCE_TENSOR_MAX, x, row_max);
          B.pointwise("softmax max with the sink", CUDNN_POINTWISE_MAX, row_max, sink, -1, m);
        } else {
          B.reduction("softmax max", CUDNN_REDUCE_TENSOR_MAX, x, m);
        }
        const int64_t sub = B.virt("softmax x - max", f32, x);
        B.pointwise("softmax sub", CUDNN_POINTWISE_SUB, x, m, -1, sub);
        const int64_t e = B.virt("softmax exp", f32, x);
        B.pointwise("softmax exp", CUDNN_POINTWISE_EXP, sub, -1, -1, e);
        const int64_t z = B.virt("softmax sum", f32, row_dims, row_strides);
        if (sinks) {
          const int64_t sink_sub = B.virt("softmax sink - max", f32, row_dims, row_strides);
          B.pointwise("softmax sub_sink", CUDNN_POINTWISE_SUB, sink, m, -1, sink_sub);
          const int64_t sink_exp = B.virt("softmax exp(sink - max)", f32, row_dims, row_strides);
          B.pointwise("softmax exp_sink", CUDNN_POINTWISE_EXP, sink_sub, -1, -1, sink_exp);
          const int64_t row_sum = B.virt("softmax sum of the row", f32, row_dims, row_strides);
          B.reduction("softmax sum of the row", CUDNN_REDUCE_TENSOR_ADD, e, row_sum);
          B.pointwise("softmax add_sink", CUDNN_POINTWISE_ADD, row_sum, sink_exp, -1, z);
        } else {
          B.reduction("softmax sum", CUDNN_REDUCE_TENSOR_ADD, e, z);
        }
        const int64_t lz = B.virt("softmax log sum", f32, row_dims, row_strides);
        B.pointwise("softmax log", CUDNN_POINTWISE_LOG, z, -1, -1, lz);
        B.pointwise("softmax stats = max + log sum", CUDNN_POINTWISE_ADD, m, lz, -1, stats);
        const int64_t p = B.virt("softmax P", bf, x);
        B.pointwise("softmax div", CUDNN_POINTWISE_DIV, e, z, -1, p);
        B.matmul("bmm2 P·V", p, V, O, seq_q, -1, seq_kv);
      } else {
        const int64_t VT = B.io(uid_v, "V^T", bf, kt_dims, kt_strides, kv_ragged);
        const int64_t O = B.io(uid_o, "O", bf, q_dims, q_strides, q_ragged);
        const int64_t dO = B.io(uid_do, "dO", bf, q_dims, q_strides, q_ragged);
        const int64_t dQ = B.io(uid_dq, "dQ", bf, q_dims, q_strides, q_ragged);
        const int64_t dK = B.io(uid_dk, "dK", bf, kv_dims, kv_strides, kv_ragged);
        const int64_t dV = B.io(uid_dv, "dV", bf, kv_dims, kv_strides, kv_ragged);
        const int64_t one = B.scalar_f32("one", 1.f);
        // softmax_sum = Σ_d dO·O per row (non-virtual: it lives in our workspace)
        const int64_t dOO = B.virt("dO*O", f32, q_dims, {h * S * d, S * d, h * d, 1});
        B.pointwise("mul_dO_O", CUDNN_POINTWISE_MUL, dO, O, -1, dOO);
        const int64_t rsum = B.virt("sum dO*O", f32, row_dims, row_strides);
        B.reduction("reduce_dO_O", CUDNN_REDUCE_TENSOR_ADD, dOO, rsum);
        const int64_t softmax_sum = B.io(uid_softmax_sum, "softmax_sum", f32, row_dims, row_strides);
        B.pointwise("scale_dropout_inv", CUDNN_POINTWISE_MUL, rsum, one, -1, softmax_sum);
        gr.softmax_sum_bytes = align_up(b * h * S * 4);
        // P = exp(scores − stats), recomputed
        int64_t x = scores("bprop");
        const int64_t centred = B.virt("scores - stats", f32, x);
        B.pointwise("sub_s_m", CUDNN_POINTWISE_SUB, x, stats, -1, centred);
        x = centred;
        if (gr.padding && ver >= 90000 && ver < 91000) x = padding_mask(x, "second padding");
        x = band_masks(x);
        const int64_t exp_s = B.virt("exp_s", f32, x);
        B.pointwise("exp_s", CUDNN_POINTWISE_EXP, x, -1, -1, exp_s);
        // dV = Pᵀ·dO (summed over each GQA group)
        const int64_t pT = B.virt("P^T", bf, s_dims, st_strides);
        B.reshape("reshape_p", exp_s, pT);
        const std::vector<int64_t> full_head_strides{h * S * d, S * d, d, 1};
        if (h == hk) {
          B.matmul("matmul_pT_dO", pT, dO, dV, seq_kv, -1, seq_q);
        } else {
          const int64_t dVf = B.virt("dV full heads", bf, q_dims, full_head_strides);
          B.matmul("matmul_pT_dO", pT, dO, dVf, seq_kv, -1, seq_q);
          B.reduction("red_dV_head", CUDNN_REDUCE_TENSOR_ADD, dVf, dV);
        }
        // dS = scale · P ⊙ (dO·Vᵀ − softmax_sum), times the soft-cap's derivative 1 − tanh² where capped
        const int64_t dP = B.virt("dP", f32, s_dims, s_strides);
        B.matmul("matmul_dO_VT", dO, VT, dP, seq_q, seq_kv, -1);
        const int64_t dPc = B.virt("dP - softmax_sum", f32, dP);
        B.pointwise("sub_dP_softmax_sum", CUDNN_POINTWISE_SUB, dP, softmax_sum, -1, dPc);
        const int64_t dPe = B.virt("(dP - softmax_sum)*P", f32, dP);
        B.pointwise("mul_dP_exp_s", CUDNN_POINTWISE_MUL, dPc, exp_s, -1, dPe);
        int64_t dSc = dPe;
        if (cap_scalar >= 0) {  // cudnn-frontend's Softcap::backward: ((cap · g) ⊙ (1 − tanh²(x / cap))) / cap
          const int64_t m = B.virt("dS * soft_cap", f32, dP);
          B.pointwise("mul_by_soft_cap_bprop", CUDNN_POINTWISE_MUL, dPe, cap_scalar, -1, m);
          const int64_t dt = B.virt("dtanh", f32, dP);
          B.pointwise_backward("dtanh", CUDNN_POINTWISE_TANH_BWD, m, before_tanh, dt);
          dSc = B.virt("dtanh / soft_cap", f32, dP);
          B.pointwise("div_by_soft_cap_bprop", CUDNN_POINTWISE_DIV, dt, cap_scalar, -1, dSc);
        }
        const int64_t dS = B.virt("dS", f32, dP);
        B.pointwise("mul_dS_attn_scale", CUDNN_POINTWISE_MUL, dSc, attn_scale, -1, dS);
        // dK = dSᵀ·Q (summed over each GQA group)
        const int64_t dST = B.virt("dS^T", bf, s_dims, st_strides);
        B.reshape("reshape_dS", dS, dST);
        if (h == hk) {
          B.matmul("matmul_dST_Q", dST, Q, dK, seq_kv, -1, seq_q);
        } else {
          const int64_t dKf = B.virt("dK full heads", bf, q_dims, full_head_strides);
          B.matmul("matmul_dST_Q", dST, Q, dKf, seq_kv, -1, seq_q);
          B.reduction("red_dK_head", CUDNN_REDUCE_TENSOR_ADD, dKf, dK);
        }
        // dQ = dS·K: straight into dQ (the deterministic graph), or through an fp32 accumulator in the workspace
        // typed as cudnn-frontend leaves it: a virtual view gets the intermediate type
        const int64_t K = B.virt("K", f32, kv_dims, kv_strides, kv_ragged);
        B.reshape("reshape_k", KT, K);
        if (deterministic) {
          B.matmul("matmul_dS_K", dS, K, dQ, seq_q, -1, seq_kv);
        } else if (ragged) {  // as cudnn-frontend's THD accumulator: dQ's rows and offsets, in fp32
          const int64_t acc = B.io(uid_dq_accum, "dQ_accum", f32, q_dims, q_strides, q_ragged);
          B.matmul("matmul_dS_K", dS, K, acc, seq_q, -1, seq_kv);
          B.pointwise("identity_dQ", CUDNN_POINTWISE_IDENTITY, acc, -1, -1, dQ);
          gr.ragged_dq_accum = true;
        } else {
          const int64_t acc = B.io(uid_dq_accum, "dQ_accum", f32, q_dims, full_head_strides);
          B.matmul("matmul_dS_K", dS, K, acc, seq_q, -1, seq_kv);
          B.pointwise("identity_dQ", CUDNN_POINTWISE_IDENTITY, acc, -1, -1, dQ);
          gr.dq_accum_bytes = align_up(b * h * S * d * 4);
        }
      }
      if (B.ok()) gr.plan = B.plan(deterministic || !backward, gr.info);
      if (gr.plan != nullptr) {
        if (scalar_rank != 1)
          gr.info.notes += MT_FORMAT("{}scalars of rank {}", gr.info.notes.empty() ? "" : ", ", scalar_rank);
        break;
      }
      errors += MT_FORMAT("{}with scalars of rank {}: {}", errors.empty() ? "" : "; ", scalar_rank, B.error());
    }
    if (gr.plan != nullptr) {
      gr.plan_bytes = align_up(gr.info.workspace_bytes);
      gr.info.workspace_bytes = gr.plan_bytes + gr.softmax_sum_bytes + gr.dq_accum_bytes;
      gr.info.ok = true;
      if (sinks) gr.sinks = static_cast<float*>(alloc_(h * 4));
      if (ragged && !backward && gr.plan_bytes > kRaggedPlanBytes) {
        gr.info.ok = false;
        gr.info.error = MT_FORMAT("the ragged plan's workspace of {} B is past the {} B a ragged graph holds itself",
                                  gr.plan_bytes, kRaggedPlanBytes);
      } else if (ragged) {  // a backward's plan workspace is the shared one's start, as its unragged graph's
        const int64_t ints = align_up((3 * b + 2) * 4);
        gr.ragged_ints = static_cast<int32_t*>(alloc_(ints + (backward ? 0 : gr.plan_bytes)));
        if (!backward) {
          gr.ragged_workspace = reinterpret_cast<char*>(gr.ragged_ints) + ints;
          gr.info.workspace_bytes = 0;
        }
      }
      if (workaround) {
        std::vector<int32_t> lens(static_cast<size_t>(b), static_cast<int32_t>(S));
        gr.full_lens = static_cast<int32_t*>(alloc_(b * 4));
        MT_CHECK_CUDA(
            cudaMemcpyAsync(gr.full_lens, lens.data(), static_cast<size_t>(b * 4), cudaMemcpyHostToDevice, stream_));
        MT_CHECK_CUDA(cudaStreamSynchronize(stream_));  // once per graph: lens is about to go
      }
    } else if (gr.info.error.empty()) {
      gr.info.error = errors;
    }
  }
  gr.info.build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  log::info("attention {} batch {} seq {} heads {}/{} head_dim {} window {}{}{}{}{}: {}",
            backward ? "backward" : "forward", s.batch, s.seq, s.n_heads, s.n_kv_heads, s.head_dim, s.window,
            s.softcap > 0.f ? fmt::format(" soft-cap {}", s.softcap) : "",
            std::string(sinks ? " sinks" : "") + (s.alibi_slopes != nullptr ? " ALiBi" : ""),
            padded ? (ragged ? " ragged" : " padded") : "", causal ? "" : " unmasked (a tile below the diagonal)",
            gr.info.ok ? fmt::format("cuDNN {} engine {} {} ({:.1f} MiB workspace, built in {:.0f} ms{})", ver,
                                     gr.info.engine, gr.info.knobs, gr.info.workspace_bytes / 1048576.0,
                                     gr.info.build_ms, gr.info.notes.empty() ? "" : ", " + gr.info.notes)
                       : "our kernel (cuDNN: " + gr.info.error + ")");
  return gr;
}

CudnnAttention::Layout CudnnAttention::layout_for(const AttnShape& s) {
  Layout l{s, s.seq_lens != nullptr, false};
  const int64_t bucket = cudnn_seq_bucket(s.seq);
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
  return g.builder->survey(deterministic || !backward);
}

bool CudnnAttention::use_engine_config(bool backward, const AttnShape& s, bool deterministic,
                                       const CudnnEngineConfig& c) {
  const Layout l = layout_for(s);
  Graph& g = graph(backward, l.shape, l.padded, deterministic);
  if (!g.info.ok) return false;
  CudnnPlanInfo info;
  cudnnBackendDescriptor_t plan = g.builder->plan_for(c, info);
  if (plan == nullptr) {
    log::debug("attention: engine {} {} does not finalize: {}", c.engine, c.describe(), g.builder->error());
    return false;
  }
  g.plan = plan;
  g.plan_bytes = align_up(info.workspace_bytes);
  g.info.engine = info.engine;
  g.info.knobs = info.knobs;
  g.info.notes = info.notes;
  g.info.workspace_bytes = g.plan_bytes + g.softmax_sum_bytes + g.dq_accum_bytes;
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

void log_attention_choice(AttentionChoice c, int64_t limit_bytes) {
  log::info("attention: {}", describe_attention_choice(c, limit_bytes));
}

bool CudnnAttention::chooses(AttentionChoice c, bool backward, const AttnShape& s, int64_t limit_bytes) {
  const int64_t need = workspace_need(backward, s, limit_bytes);
  if (need < 0) return false;  // the plan did not finalize: logged when it was built
  const AttentionDecision d = choose_attention(c, backward, cudnn_attention_gap(s, DType::bf16), need, limit_bytes);
  if (!d.cudnn && refusals_logged_.insert({backward, s.batch, s.seq, limit_bytes}).second)
    log::info("attention {} batch {} seq {}: our kernel ({})", backward ? "backward" : "forward", s.batch, s.seq,
              d.why);
  return d.cudnn;
}

int64_t CudnnAttention::workspace_need(bool backward, const AttnShape& s, int64_t limit_bytes) {
  if (s.segment_batch != nullptr) return segment_workspace_need(backward, segment_calls(backward, s, limit_bytes));
  const int64_t n = backward ? cudnn_backward_batch(s, limit_bytes) : s.batch;
  if (n < s.batch) {  // the first call is the largest; the last may be shorter
    const int64_t last = s.batch - (s.batch - 1) / n * n;
    const int64_t first_need = call_workspace_need(true, cudnn_backward_call(s, 0, limit_bytes));
    if (first_need < 0 ||
        (last != n && call_workspace_need(true, cudnn_backward_call(s, s.batch - last, limit_bytes)) < 0))
      return -1;
    return first_need;
  }
  return call_workspace_need(backward, s);
}

int64_t CudnnAttention::call_workspace_need(bool backward, const AttnShape& s) {
  if (const int64_t T = backward ? cudnn_backward_tile(s) : 0; T > 0) return tile_graphs(s, T).workspace_bytes;
  const Layout l = layout_for(s);
  const int64_t rows = s.batch * s.seq;
  if (const int64_t ragged = !l.padded  ? -1
                             : backward ? (l.staged ? ragged_backward_bytes(l.shape, rows) : -1)
                                        : ragged_forward_bytes(l.shape, rows, l.staged);
      ragged >= 0)
    return ragged;
  const Graph& g = graph(backward, l.shape, l.padded, cudnn_deterministic_backward());  // the forward's ignores it
  return g.info.ok ? g.info.workspace_bytes + cudnn_staging_bytes(backward, s) : -1;
}

CudnnAttention::TileGraphs CudnnAttention::tile_graphs(const AttnShape& s, int64_t T) {
  AttnShape tile = s;
  tile.seq = T;
  tile.seq_lens = nullptr;
  const bool padded = s.seq_lens != nullptr;  // each tile's lengths (tile_lengths) skip its padded rows
  Graph& diagonal = graph(true, tile, padded, true, true);
  Graph& below = graph(true, tile, padded, true, false);
  const bool ok = diagonal.info.ok && below.info.ok;
  return {&diagonal, &below,
          ok ? std::max(diagonal.plan_bytes, below.plan_bytes) + cudnn_tiled_side_bytes(s, T) : int64_t{-1}};
}

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

// The variant pack's uids and device (or, for scalars, host) pointers.
struct Bindings {
  std::vector<int64_t> uids;
  std::vector<void*> ptrs;
  void add(int64_t uid, const void* p) {
    uids.push_back(uid);
    ptrs.push_back(const_cast<void*>(p));
  }
};

// Runs g's plan with the bindings plus the graph's scalars.
void execute(void* handle, const CudnnAttention::Graph& g, Bindings b, void* workspace) {
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

// A forward graph's tensors; lens (its padding mask's lengths) nullptr where it has none.
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

// A backward graph's ten tensors (its lengths, ragged offsets, ALiBi's slopes and dQ accumulator are bound apart).
Bindings backward_bindings(const void* q, const void* k, const void* v, const void* out, const void* dout,
                           const void* stats, void* dq, void* dk, void* dv, void* softmax_sum) {
  Bindings ptrs;
  const int64_t uids[] = {uid_q, uid_k, uid_v, uid_o, uid_do, uid_stats, uid_dq, uid_dk, uid_dv, uid_softmax_sum};
  const void* data[] = {q, k, v, out, dout, stats, dq, dk, dv, softmax_sum};
  for (int e = 0; e < 10; ++e) ptrs.add(uids[e], data[e]);
  return ptrs;
}

// The gradients' padded rows zeroed where the call has lengths: what cuDNN leaves there (or never writes) is not kept.
void zero_padded_gradient_rows(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv, const AttnShape& s,
                               cudaStream_t stream) {
  if (s.seq_lens == nullptr) return;
  zero_padded_attention_rows(dq, s.n_heads * s.head_dim, nullptr, s, stream);
  zero_padded_attention_rows(dk, s.n_kv_heads * s.head_dim, nullptr, s, stream);
  zero_padded_attention_rows(dv, s.n_kv_heads * s.head_dim, nullptr, s, stream);
}

// A forward graph's ALiBi slopes and sinks (cast into the graph's fp32 copy: cuDNN takes them as fp32, ours are the
// compute dtype's).
void bind_bias_and_sinks(const CudnnAttention::Graph& g, const AttnShape& s, Bindings& ptrs, cudaStream_t stream) {
  if (g.alibi) ptrs.add(uid_alibi, s.alibi_slopes);
  if (g.sinks != nullptr) {
    cast<float, __nv_bfloat16>(g.sinks, static_cast<const __nv_bfloat16*>(s.sinks), s.n_heads, stream);
    ptrs.add(uid_sinks, g.sinks);
  }
}

// A non-deterministic backward's fp32 dQ accumulator of `bytes` (the graph's, or a ragged call's), past its plan
// workspace and softmax sum; zeroed here before cuDNN 9.6, which zeroes it itself.
void bind_dq_accum(const CudnnAttention::Graph& g, int64_t bytes, char* ws, int64_t version, Bindings& ptrs,
                   cudaStream_t stream) {
  if (bytes == 0) return;
  void* acc = ws + g.plan_bytes + g.softmax_sum_bytes;
  if (version < 90600) MT_CHECK_CUDA(cudaMemsetAsync(acc, 0, static_cast<size_t>(bytes), stream));
  ptrs.add(uid_dq_accum, acc);
}

// A ragged non-deterministic backward's dQ accumulator over a call of rows_in_call rows (0 for any other graph).
int64_t ragged_dq_accum_bytes(const CudnnAttention::Graph& g, const AttnShape& g_shape, int64_t rows_in_call) {
  return g.ragged_dq_accum ? align_up(rows_in_call * g_shape.n_heads * g_shape.head_dim * 4) : 0;
}

// Where a ragged backward's stats begin in the shared workspace: past its plan workspace, softmax sum and dQ
// accumulator.
int64_t ragged_stats_offset(const CudnnAttention::Graph& g, const AttnShape& g_shape, int64_t rows_in_call) {
  return g.info.workspace_bytes + ragged_dq_accum_bytes(g, g_shape, rows_in_call);
}

// A ragged graph's offsets and lengths (ragged_offsets, into the graph's own ints) bound: the padding mask's lengths,
// the Q/O and the K/V offsets.
void bind_ragged(const CudnnAttention::Graph& g, const AttnShape& g_shape, const int32_t* starts, const int32_t* lens,
                 int64_t seq, int64_t rows_in_call, Bindings& ptrs, cudaStream_t stream) {
  ragged_offsets(g.q_offsets(), g.kv_offsets(), g.ragged_lens(), starts, lens, g_shape.batch, seq,
                 g_shape.n_heads * g_shape.head_dim, g_shape.n_kv_heads * g_shape.head_dim, rows_in_call, stream);
  ptrs.add(uid_seq_q, g.ragged_lens());
  ptrs.add(uid_seq_kv, g.ragged_lens());
  ptrs.add(uid_q_ragged, g.q_offsets());
  ptrs.add(uid_kv_ragged, g.kv_offsets());
}

}  // namespace

int64_t CudnnAttention::ragged_forward_bytes(const AttnShape& g_shape, int64_t rows_in_call, bool stats_here) {
  const int64_t width = std::max(g_shape.n_heads, g_shape.n_kv_heads) * g_shape.head_dim;
  if (!cudnn_ragged() || rows_in_call * width > std::numeric_limits<int32_t>::max()) return -1;
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
  execute(handle_, g, std::move(ptrs), g.ragged_workspace);
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
  if (s.seq_lens != nullptr) zero_padded_attention_rows(out, h * s.head_dim, lse, s, stream_);
  return true;
}

CudnnAttention::Graph& CudnnAttention::ragged_backward_graph(const AttnShape& g_shape) {
  return graph(true, g_shape, true, cudnn_deterministic_backward(), true, true);
}

// Past head_dim 128 cuDNN 9.14's ragged backward finalizes but its gradients are wrong (12-71 % relative error in the
// op table's head_dim-256 rows, padded, windowed and soft-capped alike; an MHA row's dK and dV NaN, and GQA's full-head
// dK and dV in the workspace, as cudnn-frontend lays out a ragged graph's, change nothing), so those shapes keep the
// padded graph.
constexpr int64_t kRaggedBackwardHeadDim = 128;

int64_t CudnnAttention::ragged_backward_bytes(const AttnShape& g_shape, int64_t rows_in_call) {
  const int64_t width = std::max(g_shape.n_heads, g_shape.n_kv_heads) * g_shape.head_dim;
  if (!cudnn_ragged() || cudnn_backward_tile(g_shape) > 0 || g_shape.head_dim > kRaggedBackwardHeadDim ||
      rows_in_call * width > std::numeric_limits<int32_t>::max())
    return -1;
  const Graph& g = ragged_backward_graph(g_shape);
  if (!g.info.ok) return -1;
  return ragged_stats_offset(g, g_shape, rows_in_call) + align_up(g_shape.batch * g_shape.n_heads * g_shape.seq * 4);
}

float* CudnnAttention::ragged_backward_stats(const AttnShape& g_shape, int64_t rows_in_call) {
  const int64_t at = ragged_stats_offset(ragged_backward_graph(g_shape), g_shape, rows_in_call);
  return reinterpret_cast<float*>(static_cast<char*>(workspace_) + at);
}

void CudnnAttention::ragged_backward(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv, const __nv_bfloat16* dout,
                                     const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                     const __nv_bfloat16* out, const AttnShape& g_shape, const int32_t* starts,
                                     const int32_t* lens, int64_t seq, int64_t rows_in_call) {
  Graph& g = ragged_backward_graph(g_shape);
  MT_ASSERT(g.info.ok, "a ragged backward without its graph: ragged_backward_bytes refuses it first");
  char* ws = static_cast<char*>(workspace_);
  Bindings ptrs = backward_bindings(q, k, v, out, dout, ws + ragged_stats_offset(g, g_shape, rows_in_call), dq, dk, dv,
                                    ws + g.plan_bytes);
  bind_ragged(g, g_shape, starts, lens, seq, rows_in_call, ptrs, stream_);
  bind_dq_accum(g, ragged_dq_accum_bytes(g, g_shape, rows_in_call), ws, version(), ptrs, stream_);
  if (g.alibi) ptrs.add(uid_alibi, g_shape.alibi_slopes);
  execute(handle_, g, std::move(ptrs), ws);
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
  restride_rows(ragged_backward_stats(bucket, b * S), lse, b * s.n_heads, S, bucket.seq, 4, stream_);
  ragged_backward(dq, dk, dv, dout, q, k, v, out, bucket, nullptr, s.seq_lens, S, b * S);
  zero_padded_gradient_rows(dq, dk, dv, s, stream_);
  return true;
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
  const int64_t q_bytes = align_up(b * Sp * h * d * 2), kv_bytes = align_up(b * Sp * hk * d * 2);
  const int64_t stats_bytes = align_up(b * h * Sp * 4);
  const int64_t staging = cudnn_staging_bytes(false, s);
  if (!g.info.ok || !reserve_workspace(g, staging)) return false;
  char* ws = static_cast<char*>(workspace_);
  const void *q_in = q, *k_in = k, *v_in = v, *lens = s.seq_lens;
  void *o_out = out, *stats_out = lse;
  if (l.staged) {  // rows [S, Sp) of every sequence are padding: 0 in, masked by the lengths
    char* st = ws + g.info.workspace_bytes;
    char *sq = st, *sk = sq + q_bytes, *sv = sk + kv_bytes, *so = sv + kv_bytes, *sstats = so + q_bytes;
    int32_t* slens = reinterpret_cast<int32_t*>(sstats + stats_bytes);
    restride_rows(sq, q, b, S, Sp, h * d * 2, stream_);
    restride_rows(sk, k, b, S, Sp, hk * d * 2, stream_);
    restride_rows(sv, v, b, S, Sp, hk * d * 2, stream_);
    if (lens == nullptr) {
      fill_ints(slens, b, static_cast<int32_t>(S), stream_);
      lens = slens;
    }
    q_in = sq, k_in = sk, v_in = sv, o_out = so, stats_out = sstats;
  }
  Bindings ptrs = forward_bindings(q_in, k_in, v_in, o_out, stats_out, g.padding ? lens : nullptr);
  bind_bias_and_sinks(g, s, ptrs, stream_);
  execute(handle_, g, std::move(ptrs), ws);
  if (l.staged) {
    restride_rows(out, o_out, b, Sp, S, h * d * 2, stream_);
    restride_rows(lse, stats_out, b * h, Sp, S, 4, stream_);
  }
  if (s.seq_lens != nullptr) zero_padded_attention_rows(out, h * d, lse, s, stream_);
  return true;
}

// The backward in calls of cudnn_backward_batch sequences (one call where the batch fits), each
// sequence's rows at its offset; every call's graph is built (workspace_need) before the first runs, and the first
// (largest) call's workspace serves the rest, so that a refusal comes before anything is written.
bool CudnnAttention::backward(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv, const __nv_bfloat16* dout,
                              const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                              const __nv_bfloat16* out, const float* lse, const AttnShape& s, int64_t limit_bytes) {
  if (s.segment_batch != nullptr) return segment_backward(dq, dk, dv, dout, q, k, v, out, lse, s, limit_bytes);
  const int64_t per_call = cudnn_backward_batch(s, limit_bytes);
  if (per_call >= s.batch) return backward_call(dq, dk, dv, dout, q, k, v, out, lse, s);
  if (workspace_need(true, s, limit_bytes) < 0) return false;
  const int64_t q_row = s.seq * s.n_heads * s.head_dim, kv_row = s.seq * s.n_kv_heads * s.head_dim;
  const int64_t lse_row = s.n_heads * s.seq;
  for (int64_t b0 = 0; b0 < s.batch; b0 += per_call) {
    const int64_t qo = b0 * q_row, kvo = b0 * kv_row;
    const bool ran = backward_call(dq + qo, dk + kvo, dv + kvo, dout + qo, q + qo, k + kvo, v + kvo, out + qo,
                                   lse + b0 * lse_row, cudnn_backward_call(s, b0, limit_bytes));
    if (!ran && b0 == 0) return false;  // its workspace could not be allocated: nothing has run
    MT_ASSERT(ran, "cuDNN attention's backward call at sequence {} of {} refused after the first ran", b0, s.batch);
  }
  return true;
}

bool CudnnAttention::backward_call(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv, const __nv_bfloat16* dout,
                                   const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                   const __nv_bfloat16* out, const float* lse, const AttnShape& s) {
  if (const int64_t T = cudnn_backward_tile(s); T > 0) return tiled_backward(dq, dk, dv, dout, q, k, v, out, lse, s, T);
  const Layout l = layout_for(s);
  if (l.staged && ragged_batch_backward(dq, dk, dv, dout, q, k, v, out, lse, s, l.shape)) return true;
  Graph& g = graph(true, l.shape, l.padded, cudnn_deterministic_backward());
  const int64_t b = s.batch, S = s.seq, Sp = l.shape.seq, h = s.n_heads, hk = s.n_kv_heads, d = s.head_dim;
  const int64_t q_bytes = align_up(b * Sp * h * d * 2), kv_bytes = align_up(b * Sp * hk * d * 2);
  const int64_t stats_bytes = align_up(b * h * Sp * 4);
  const int64_t staging = cudnn_staging_bytes(true, s);
  if (!g.info.ok || !reserve_workspace(g, staging)) return false;
  char* ws = static_cast<char*>(workspace_);
  const void *q_in = q, *k_in = k, *v_in = v, *o_in = out, *do_in = dout, *stats_in = lse;
  const void* lens = s.seq_lens != nullptr ? static_cast<const void*>(s.seq_lens) : g.full_lens;
  void *dq_out = dq, *dk_out = dk, *dv_out = dv;
  if (l.staged) {  // as forward: inputs into the bucket's layout (pad rows 0, pad lse 0), gradients back out
    char* st = ws + g.info.workspace_bytes;
    char *sq = st, *so = sq + q_bytes, *sdo = so + q_bytes, *sdq = sdo + q_bytes, *sk = sdq + q_bytes;
    char *sv = sk + kv_bytes, *sdk = sv + kv_bytes, *sdv = sdk + kv_bytes, *sstats = sdv + kv_bytes;
    int32_t* slens = reinterpret_cast<int32_t*>(sstats + stats_bytes);
    restride_rows(sq, q, b, S, Sp, h * d * 2, stream_);
    restride_rows(so, out, b, S, Sp, h * d * 2, stream_);
    restride_rows(sdo, dout, b, S, Sp, h * d * 2, stream_);
    restride_rows(sk, k, b, S, Sp, hk * d * 2, stream_);
    restride_rows(sv, v, b, S, Sp, hk * d * 2, stream_);
    restride_rows(sstats, lse, b * h, S, Sp, 4, stream_);
    if (s.seq_lens == nullptr) {
      fill_ints(slens, b, static_cast<int32_t>(S), stream_);
      lens = slens;
    }
    q_in = sq, k_in = sk, v_in = sv, o_in = so, do_in = sdo, stats_in = sstats;
    dq_out = sdq, dk_out = sdk, dv_out = sdv;
  }
  Bindings ptrs = backward_bindings(q_in, k_in, v_in, o_in, do_in, stats_in, dq_out, dk_out, dv_out, ws + g.plan_bytes);
  bind_dq_accum(g, g.dq_accum_bytes, ws, version(), ptrs, stream_);
  if (g.padding) {
    ptrs.add(uid_seq_q, lens);
    ptrs.add(uid_seq_kv, lens);
  }
  if (g.alibi) ptrs.add(uid_alibi, s.alibi_slopes);
  execute(handle_, g, std::move(ptrs), ws);
  if (l.staged) {
    restride_rows(dq, dq_out, b, Sp, S, h * d * 2, stream_);
    restride_rows(dk, dk_out, b, Sp, S, hk * d * 2, stream_);
    restride_rows(dv, dv_out, b, Sp, S, hk * d * 2, stream_);
  }
  zero_padded_gradient_rows(dq, dk, dv, s, stream_);
  return true;
}

// The tiles in a fixed order: for each row i of query tiles (q, o, dO and lse gathered into tile buffers, rows past
// the sequence 0 and their lse kCudnnPadLse, as padded rows'), the key tiles j <= i (k, v gathered; j == i the
// diagonal graph), each tile's dQ summed into the row's fp32 accumulator and its dK, dV into the sequence's; the
// row's dQ stored when it is done, dK and dV at the end. A padded call's tiles carry each sequence's lengths within
// the tile, so that cuDNN skips the padded rows and columns (a packed group's long segments, a right-padded batch):
// what it leaves in their dq, dk, dv rows lands only on padded rows, which are zeroed at the end.
bool CudnnAttention::tiled_backward(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv, const __nv_bfloat16* dout,
                                    const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                    const __nv_bfloat16* out, const float* lse, const AttnShape& s, int64_t T) {
  const TileGraphs tiles = tile_graphs(s, T);
  if (tiles.workspace_bytes < 0) return false;
  Graph &diagonal = *tiles.diagonal, &below = *tiles.below;
  if (!reserve_workspace(diagonal, tiles.workspace_bytes - diagonal.info.workspace_bytes)) return false;
  const int64_t b = s.batch, S = s.seq, h = s.n_heads, qw = h * s.head_dim, kw = s.n_kv_heads * s.head_dim;
  const int64_t n = (S + T - 1) / T;
  char* ws = static_cast<char*>(workspace_);
  char* at = ws + std::max(diagonal.plan_bytes, below.plan_bytes);
  auto take = [&](int64_t bytes) {
    char* p = at;
    at += align_up(bytes);
    return p;
  };
  auto* softmax_sum = reinterpret_cast<float*>(take(b * h * T * 4));
  auto* lse_tile = reinterpret_cast<float*>(take(b * h * T * 4));
  using bf = __nv_bfloat16;
  auto *q_tile = reinterpret_cast<bf*>(take(b * T * qw * 2)), *o_tile = reinterpret_cast<bf*>(take(b * T * qw * 2));
  auto *do_tile = reinterpret_cast<bf*>(take(b * T * qw * 2)), *dq_tile = reinterpret_cast<bf*>(take(b * T * qw * 2));
  auto *k_tile = reinterpret_cast<bf*>(take(b * T * kw * 2)), *v_tile = reinterpret_cast<bf*>(take(b * T * kw * 2));
  auto *dk_tile = reinterpret_cast<bf*>(take(b * T * kw * 2)), *dv_tile = reinterpret_cast<bf*>(take(b * T * kw * 2));
  auto* dq_acc = reinterpret_cast<float*>(take(b * T * qw * 4));
  auto* dk_acc = reinterpret_cast<float*>(take(b * n * T * kw * 4));
  auto* dv_acc = reinterpret_cast<float*>(take(b * n * T * kw * 4));
  auto *q_lens = reinterpret_cast<int32_t*>(take(b * 4)), *kv_lens = reinterpret_cast<int32_t*>(take(b * 4));
  const int64_t kv_rows = n * T;  // the accumulators' rows per sequence
  for (int64_t i = 0; i < n; ++i) {
    gather_rows(q_tile, q, b, S, i * T, T, qw * 2, stream_);
    gather_rows(o_tile, out, b, S, i * T, T, qw * 2, stream_);
    gather_rows(do_tile, dout, b, S, i * T, T, qw * 2, stream_);
    gather_lse(lse_tile, lse, b, h, S, i * T, T, s.seq_lens, stream_);
    if (diagonal.padding) tile_lengths(q_lens, s.seq_lens, b, i * T, T, stream_);
    for (int64_t j = 0; j <= i; ++j) {
      const Graph& g = j == i ? diagonal : below;
      gather_rows(k_tile, k, b, S, j * T, T, kw * 2, stream_);
      gather_rows(v_tile, v, b, S, j * T, T, kw * 2, stream_);
      Bindings ptrs =
          backward_bindings(q_tile, k_tile, v_tile, o_tile, do_tile, lse_tile, dq_tile, dk_tile, dv_tile, softmax_sum);
      if (g.padding) {
        tile_lengths(kv_lens, s.seq_lens, b, j * T, T, stream_);
        ptrs.add(uid_seq_q, q_lens);
        ptrs.add(uid_seq_kv, kv_lens);
      }
      execute(handle_, g, std::move(ptrs), ws);
      accumulate_rows(dq_acc, T * qw, dq_tile, T * qw, b, T, qw, j == 0, stream_);
      accumulate_rows(dk_acc + j * T * kw, kv_rows * kw, dk_tile, T * kw, b, T, kw, i == j, stream_);
      accumulate_rows(dv_acc + j * T * kw, kv_rows * kw, dv_tile, T * kw, b, T, kw, i == j, stream_);
    }
    store_rows(dq + i * T * qw, S * qw, dq_acc, T * qw, b, std::min(T, S - i * T), qw, stream_);
  }
  store_rows(dk, S * kw, dk_acc, kv_rows * kw, b, S, kw, stream_);
  store_rows(dv, S * kw, dv_acc, kv_rows * kw, b, S, kw, stream_);
  zero_padded_gradient_rows(dq, dk, dv, s, stream_);
  return true;
}

std::vector<CudnnAttention::SegmentCall> CudnnAttention::segment_calls(bool backward, const AttnShape& s,
                                                                       int64_t limit_bytes) {
  std::vector<SegmentCall> calls;
  int64_t planned = 0;  // the most the plan's formula counts for a call
  for (const SegmentGroup& g : s.segment_batch->groups) {
    const AttnShape v = cudnn_segment_group_shape(s, g);
    const int64_t per_call = cudnn_segment_call_batch(backward, v, limit_bytes);
    for (int64_t b0 = 0; b0 < v.batch; b0 += per_call) {
      AttnShape c = v;
      c.batch = std::min(per_call, v.batch - b0);
      c.seq_lens = v.seq_lens + b0;
      calls.push_back({c, s.segment_batch->starts + g.first + b0});
      planned = std::max(planned, cudnn_segment_call_bytes(backward, c, c.batch));
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

// Every call's graph is built and the workspace grown to the largest call before anything runs, so that a refusal
// comes before anything is written and no call moves the workspace under another's gathered rows; each call's rows
// lie past its own graph's workspace. A call whose ragged graph runs reads and writes the packed rows in place.
bool CudnnAttention::segment_forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* q, const __nv_bfloat16* k,
                                     const __nv_bfloat16* v, const AttnShape& s, int64_t limit_bytes) {
  using bf = __nv_bfloat16;
  const std::vector<SegmentCall> calls = segment_calls(false, s, limit_bytes);
  const int64_t need = segment_workspace_need(false, calls);
  const int64_t rows_in_call = s.batch * s.seq;
  if (need < 0) return false;
  if (!calls.empty()) {  // the plan a failed allocation drops: the first call's
    const bool ragged = calls[0].ragged_bytes >= 0;
    if (!reserve_bytes(graph(false, calls[0].shape, true, true, true, ragged), need)) return false;
  }
  const int64_t qw = s.n_heads * s.head_dim, kw = s.n_kv_heads * s.head_dim, h = s.n_heads;
  for (const SegmentCall& c : calls) {
    const int64_t n = c.shape.batch, L = c.shape.seq, rows = n * L;
    const int32_t* lens = c.shape.seq_lens;
    if (c.ragged_bytes >= 0) {  // each segment read and written in place
      float* vlse = static_cast<float*>(workspace_);
      ragged_forward(out, vlse, q, k, v, c.shape, c.starts, lens, L, rows_in_call);
      scatter_segment_lse(lse, vlse, c.starts, lens, n, h, L, s.seq, stream_);
      continue;
    }
    Carver ws{static_cast<char*>(workspace_) + segment_graph_bytes(false, c.shape)};
    bf *vq = ws.take<bf>(rows * qw), *vo = ws.take<bf>(rows * qw), *vk = ws.take<bf>(rows * kw);
    bf* vv = ws.take<bf>(rows * kw);
    float* vlse = ws.take<float>(n * h * L);
    gather_segment_rows(vq, q, c.starts, lens, n, L, qw * 2, stream_);
    gather_segment_rows(vk, k, c.starts, lens, n, L, kw * 2, stream_);
    gather_segment_rows(vv, v, c.starts, lens, n, L, kw * 2, stream_);
    const bool ran = bucket_forward(vo, vlse, vq, vk, vv, c.shape);
    MT_ASSERT(ran, "cuDNN attention's forward of packed segments refused a call after its plan was built");
    scatter_segment_rows(out, vo, c.starts, lens, n, L, qw * 2, stream_);
    scatter_segment_lse(lse, vlse, c.starts, lens, n, h, L, s.seq, stream_);
  }
  if (s.seq_lens != nullptr) zero_padded_attention_rows(out, qw, lse, s, stream_);
  return true;
}

bool CudnnAttention::segment_backward(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv,
                                      const __nv_bfloat16* dout, const __nv_bfloat16* q, const __nv_bfloat16* k,
                                      const __nv_bfloat16* v, const __nv_bfloat16* out, const float* lse,
                                      const AttnShape& s, int64_t limit_bytes) {
  using bf = __nv_bfloat16;
  const std::vector<SegmentCall> calls = segment_calls(true, s, limit_bytes);
  const int64_t need = segment_workspace_need(true, calls);
  const int64_t rows_in_call = s.batch * s.seq;
  if (need < 0) return false;
  if (!calls.empty()) {  // the plan a failed allocation drops: the first call's
    const bool ragged = calls[0].ragged_bytes >= 0;
    if (!reserve_bytes(graph(true, calls[0].shape, true, cudnn_deterministic_backward(), true, ragged), need))
      return false;
  }
  const int64_t qw = s.n_heads * s.head_dim, kw = s.n_kv_heads * s.head_dim, h = s.n_heads;
  for (const SegmentCall& c : calls) {
    const int64_t n = c.shape.batch, L = c.shape.seq, rows = n * L;
    const int32_t* lens = c.shape.seq_lens;
    if (c.ragged_bytes >= 0) {  // each segment read and written in place
      gather_segment_lse(ragged_backward_stats(c.shape, rows_in_call), lse, c.starts, lens, n, h, L, s.seq, stream_);
      ragged_backward(dq, dk, dv, dout, q, k, v, out, c.shape, c.starts, lens, L, rows_in_call);
      continue;
    }
    Carver ws{static_cast<char*>(workspace_) + segment_graph_bytes(true, c.shape)};
    bf *vq = ws.take<bf>(rows * qw), *vo = ws.take<bf>(rows * qw), *vdo = ws.take<bf>(rows * qw);
    bf *vdq = ws.take<bf>(rows * qw), *vk = ws.take<bf>(rows * kw), *vv = ws.take<bf>(rows * kw);
    bf *vdk = ws.take<bf>(rows * kw), *vdv = ws.take<bf>(rows * kw);
    float* vlse = ws.take<float>(n * h * L);
    gather_segment_rows(vq, q, c.starts, lens, n, L, qw * 2, stream_);
    gather_segment_rows(vo, out, c.starts, lens, n, L, qw * 2, stream_);
    gather_segment_rows(vdo, dout, c.starts, lens, n, L, qw * 2, stream_);
    gather_segment_rows(vk, k, c.starts, lens, n, L, kw * 2, stream_);
    gather_segment_rows(vv, v, c.starts, lens, n, L, kw * 2, stream_);
    gather_segment_lse(vlse, lse, c.starts, lens, n, h, L, s.seq, stream_);
    const bool ran = backward_call(vdq, vdk, vdv, vdo, vq, vk, vv, vo, vlse, c.shape);
    MT_ASSERT(ran, "cuDNN attention's backward of packed segments refused a call after its plan was built");
    scatter_segment_rows(dq, vdq, c.starts, lens, n, L, qw * 2, stream_);
    scatter_segment_rows(dk, vdk, c.starts, lens, n, L, kw * 2, stream_);
    scatter_segment_rows(dv, vdv, c.starts, lens, n, L, kw * 2, stream_);
  }
  zero_padded_gradient_rows(dq, dk, dv, s, stream_);
  return true;
}

}  // namespace mt::cuda
