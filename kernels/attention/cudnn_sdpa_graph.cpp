// The SDPA operation graphs (see cudnn_sdpa_graph.h), op for op as cudnn-frontend's composite SDPA nodes lower them:
// matmul, scale, the soft-cap score modifier div / tanh / mul, ALiBi's gen_index / sub / mul by the slopes / add,
// padding / causal / left-bound masks as gen_index + cmp + binary_select, softmax through max/sum reductions with the
// stats out and a sink joining the max and the sum, matmul; bprop: dO·O row sums, the recomputed probabilities, dV,
// dP, dS with the soft-cap's mul / tanh_bwd / div, dK, dQ, GQA head reductions.
#include "kernels/attention/cudnn_sdpa_graph.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace mt::cuda {

float sdpa_scale(const AttnShape& s) {
  return s.scale > 0.f ? s.scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
}

int64_t sdpa_window(const AttnShape& s) { return s.window > 0 && s.window < s.seq ? s.window : 0; }

SdpaSideTensors add_sdpa_graph(CudnnGraphBuilder& B, const AttnShape& s, const SdpaGraphSpec& spec) {
  const bool backward = spec.backward, deterministic = spec.deterministic, causal = spec.causal;
  const bool ragged = spec.ragged, sinks = spec.sinks, alibi = s.alibi_slopes != nullptr;
  const int64_t ver = spec.version;
  const int64_t b = s.batch, S = s.seq, h = s.n_heads, hk = s.n_kv_heads, d = s.head_dim, dv = s.value_head_dim();
  const int64_t window = sdpa_window(s);
  const float scale = sdpa_scale(s);
  SdpaSideTensors side;
  const auto f32 = CUDNN_DATA_FLOAT, bf = CUDNN_DATA_BFLOAT16, i32 = CUDNN_DATA_INT32, bl = CUDNN_DATA_BOOLEAN;
  const std::vector<int64_t> q_dims{b, h, S, d}, q_strides{S * h * d, d, h * d, 1};
  const std::vector<int64_t> kv_dims{b, hk, S, d}, kv_strides{S * hk * d, d, hk * d, 1};
  const std::vector<int64_t> kt_dims{b, hk, d, S}, kt_strides{S * hk * d, d, 1, hk * d};
  // V, O and their gradients have the value head dim (latent attention: 128 where Q and K have 192)
  const std::vector<int64_t> o_dims{b, h, S, dv}, o_strides{S * h * dv, dv, h * dv, 1};
  const std::vector<int64_t> v_dims{b, hk, S, dv}, v_strides{S * hk * dv, dv, hk * dv, 1};
  const std::vector<int64_t> vt_dims{b, hk, dv, S}, vt_strides{S * hk * dv, dv, 1, hk * dv};
  const std::vector<int64_t> s_dims{b, h, S, S}, s_strides{h * S * S, S * S, S, 1};
  const std::vector<int64_t> st_strides{h * S * S, S * S, 1, S};  // the transposed view of an S×S tile
  const std::vector<int64_t> row_dims{b, h, S, 1}, row_strides{h * S, S, 1, 1};
  const float neg_inf = ver < 91000 ? std::numeric_limits<float>::lowest() : -std::numeric_limits<float>::infinity();

  // Ragged: each sequence's rows of Q, O, dO and dQ, of K, V, dK and dV start at its offset, not at b·seq rows
  // (the stats and softmax_sum stay [b, h, S, 1]).
  const int64_t q_ragged = ragged ? B.io(uid_q_ragged, "Q/O offsets", i32, {b + 1, 1, 1, 1}, {1, 1, 1, 1}) : -1;
  const int64_t kv_ragged = ragged ? B.io(uid_kv_ragged, "K/V offsets", i32, {b + 1, 1, 1, 1}, {1, 1, 1, 1}) : -1;
  const int64_t Q = B.io(uid_q, "Q", bf, q_dims, q_strides, q_ragged);
  const int64_t KT = B.io(uid_k, "K^T", bf, kt_dims, kt_strides, kv_ragged);
  const int64_t stats = B.io(uid_stats, "stats (lse)", f32, row_dims, row_strides);
  const int64_t seq_q = spec.padding ? B.io(uid_seq_q, "seq_len_q", i32, {b, 1, 1, 1}, {1, 1, 1, 1}) : -1;
  const int64_t seq_kv = spec.padding ? B.io(uid_seq_kv, "seq_len_kv", i32, {b, 1, 1, 1}, {1, 1, 1, 1}) : -1;
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
    if (alibi) s1 = alibi_bias(s1, tag);  // after the soft-cap, as the CPU reference adds it
    return spec.padding ? padding_mask(s1, tag + " padding") : s1;
  };

  if (!backward) {
    const int64_t V = B.io(uid_v, "V", bf, v_dims, v_strides, kv_ragged);
    const int64_t O = B.io(uid_o, "O", bf, o_dims, o_strides, q_ragged);
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
    const int64_t VT = B.io(uid_v, "V^T", bf, vt_dims, vt_strides, kv_ragged);
    const int64_t O = B.io(uid_o, "O", bf, o_dims, o_strides, q_ragged);
    const int64_t dO = B.io(uid_do, "dO", bf, o_dims, o_strides, q_ragged);
    const int64_t dQ = B.io(uid_dq, "dQ", bf, q_dims, q_strides, q_ragged);
    const int64_t dK = B.io(uid_dk, "dK", bf, kv_dims, kv_strides, kv_ragged);
    const int64_t dV = B.io(uid_dv, "dV", bf, v_dims, v_strides, kv_ragged);
    const int64_t one = B.scalar_f32("one", 1.f);
    // softmax_sum = Σ_d dO·O per row (non-virtual: it lives in our workspace)
    const int64_t dOO = B.virt("dO*O", f32, o_dims, {h * S * dv, S * dv, h * dv, 1});
    B.pointwise("mul_dO_O", CUDNN_POINTWISE_MUL, dO, O, -1, dOO);
    const int64_t rsum = B.virt("sum dO*O", f32, row_dims, row_strides);
    B.reduction("reduce_dO_O", CUDNN_REDUCE_TENSOR_ADD, dOO, rsum);
    const int64_t softmax_sum = B.io(uid_softmax_sum, "softmax_sum", f32, row_dims, row_strides);
    B.pointwise("scale_dropout_inv", CUDNN_POINTWISE_MUL, rsum, one, -1, softmax_sum);
    side.softmax_sum_bytes = align_up(b * h * S * 4);
    // P = exp(scores − stats), recomputed
    int64_t x = scores("bprop");
    const int64_t centred = B.virt("scores - stats", f32, x);
    B.pointwise("sub_s_m", CUDNN_POINTWISE_SUB, x, stats, -1, centred);
    x = centred;
    if (spec.padding && ver >= 90000 && ver < 91000) x = padding_mask(x, "second padding");
    x = band_masks(x);
    const int64_t exp_s = B.virt("exp_s", f32, x);
    B.pointwise("exp_s", CUDNN_POINTWISE_EXP, x, -1, -1, exp_s);
    // dV = Pᵀ·dO (summed over each GQA group)
    const int64_t pT = B.virt("P^T", bf, s_dims, st_strides);
    B.reshape("reshape_p", exp_s, pT);
    const std::vector<int64_t> full_head_strides{h * S * d, S * d, d, 1};
    // grad = lhs_t·rhs per query head (lhs_t a transposed S×S view; rows of `width`: the q/k or the value head dim),
    // straight into grad where every head has its own K and V, else into full heads reduced over each GQA group
    auto kv_gradient = [&](const std::string& matmul, const std::string& name, int64_t lhs_t, int64_t rhs,
                           int64_t grad, int64_t width) {
      if (h == hk) {
        B.matmul(matmul, lhs_t, rhs, grad, seq_kv, -1, seq_q);
        return;
      }
      const int64_t full =
          B.virt(name + " full heads", bf, {b, h, S, width}, {h * S * width, S * width, width, 1});
      B.matmul(matmul, lhs_t, rhs, full, seq_kv, -1, seq_q);
      B.reduction("red_" + name + "_head", CUDNN_REDUCE_TENSOR_ADD, full, grad);
    };
    kv_gradient("matmul_pT_dO", "dV", pT, dO, dV, dv);
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
    kv_gradient("matmul_dST_Q", "dK", dST, Q, dK, d);
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
      side.ragged_dq_accum = true;
    } else {
      const int64_t acc = B.io(uid_dq_accum, "dQ_accum", f32, q_dims, full_head_strides);
      B.matmul("matmul_dS_K", dS, K, acc, seq_q, -1, seq_kv);
      B.pointwise("identity_dQ", CUDNN_POINTWISE_IDENTITY, acc, -1, -1, dQ);
      side.dq_accum_bytes = align_up(b * h * S * d * 4);
    }
  }
  return side;
}

}  // namespace mt::cuda
