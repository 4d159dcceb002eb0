// Mixture-of-experts ops on the host (semantics in backend.h): the softmax top-k routers (GPT-OSS's softmax over the
// top k logits among them) and their backward, the load-balancing statistics, the stable grouping of routed rows by
// expert (a counting sort), gather / combine and their backwards (the combine's from the down projection's data
// gradient, without the expert outputs), grouped expert GEMMs (one sgemm per expert with rows), and the sigmoid-gated
// add.
// Invariant: every sum runs in a fixed order (token order, then slot order), so results depend only on the
// inputs: never on thread count, nor on which rows other experts received.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"

namespace mt::cpu {
namespace {

bool valid_token(const int32_t* seq_lens, int64_t seq, int64_t t) {
  return seq_lens == nullptr || t % seq < seq_lens[t / seq];
}

}  // namespace

namespace {

// The j-th of the k picks: the first maximum of score among allowed experts not yet taken (ties to the lower).
template <typename Score, typename Allowed>
int32_t pick(int64_t E, const int32_t* taken, int64_t j, Score score, Allowed allowed) {
  int32_t best = -1;
  for (int64_t e = 0; e < E; ++e) {
    bool used = !allowed(e);
    for (int64_t i = 0; i < j; ++i) used = used || taken[i] == e;
    if (!used && (best < 0 || score(e) > score(best))) best = static_cast<int32_t>(e);
  }
  return best;
}

// p = softmax(l) over E experts (max-subtracted, summed in expert order).
void softmax(real* p, const real* l, int64_t E) {
  real m = l[0];
  for (int64_t e = 1; e < E; ++e) m = std::max(m, l[e]);
  real sum = 0.f;
  for (int64_t e = 0; e < E; ++e) {
    p[e] = std::exp(l[e] - m);
    sum += p[e];
  }
  for (int64_t e = 0; e < E; ++e) p[e] /= sum;
}

// The softmax top k; with groups, among the topk_groups groups of the largest single probability (DeepSeek-V2's
// group_limited_greedy; ties to the lower group); weights renormalised where norm_topk, × scaling.
void softmax_route(real* p, int32_t* ix, real* w, const real* l, const MoeRouting& r) {
  const int64_t E = r.experts, k = r.top_k, G = r.groups, per = E / G;
  softmax(p, l, E);
  std::vector<int32_t> groups(static_cast<size_t>(G > 1 ? r.topk_groups : 0));
  if (G > 1) {
    std::vector<real> group_max(static_cast<size_t>(G), -INFINITY);
    for (int64_t e = 0; e < E; ++e) group_max[static_cast<size_t>(e / per)] = std::max(group_max[static_cast<size_t>(e / per)], p[e]);
    for (int64_t j = 0; j < r.topk_groups; ++j)
      groups[static_cast<size_t>(j)] = pick(G, groups.data(), j, [&](int64_t g) { return group_max[static_cast<size_t>(g)]; },
                                            [](int64_t) { return true; });
  }
  const auto allowed = [&](int64_t e) {
    if (G == 1) return true;
    for (const int32_t g : groups)
      if (e / per == g) return true;
    return false;
  };
  real selected = 0.f;
  for (int64_t j = 0; j < k; ++j) {
    ix[j] = pick(E, ix, j, [&](int64_t e) { return p[e]; }, allowed);
    w[j] = p[ix[j]];
    selected += w[j];
  }
  if (r.norm_topk)
    for (int64_t j = 0; j < k; ++j) w[j] /= selected;
  for (int64_t j = 0; j < k; ++j) w[j] *= r.scaling;
}

// GPT-OSS: p the full softmax (for the load-balancing loss); the k largest logits; w the softmax of those k.
void topk_softmax_route(real* p, int32_t* ix, real* w, const real* l, int64_t E, int64_t k) {
  softmax(p, l, E);
  for (int64_t j = 0; j < k; ++j) ix[j] = pick(E, ix, j, [&](int64_t e) { return l[e]; }, [](int64_t) { return true; });
  const real top = l[ix[0]];  // the largest selected logit
  real selected = 0.f;
  for (int64_t j = 0; j < k; ++j) {
    w[j] = std::exp(l[ix[j]] - top);
    selected += w[j];
  }
  for (int64_t j = 0; j < k; ++j) w[j] /= selected;
}

void sigmoid_route(real* p, int32_t* ix, real* w, const real* l, const MoeRouting& r) {
  const int64_t E = r.experts, k = r.top_k, G = r.groups, per = E / G;
  const auto* bias = static_cast<const real*>(r.score_bias);
  for (int64_t e = 0; e < E; ++e) p[e] = 1.f / (1.f + std::exp(-l[e]));
  const auto biased = [&](int64_t e) { return p[e] + (bias ? bias[e] : 0.f); };
  // A group's score: the sum of its two largest biased scores (its only one where a group has one expert).
  std::vector<real> group_score(static_cast<size_t>(G));
  for (int64_t g = 0; g < G; ++g) {
    real a = -INFINITY, b = -INFINITY;
    for (int64_t e = g * per; e < (g + 1) * per; ++e) {
      const real v = biased(e);
      if (v > a) {
        b = a;
        a = v;
      } else if (v > b) {
        b = v;
      }
    }
    group_score[static_cast<size_t>(g)] = per > 1 ? a + b : a;
  }
  std::vector<int32_t> groups(static_cast<size_t>(r.topk_groups));
  for (int64_t j = 0; j < r.topk_groups; ++j)
    groups[static_cast<size_t>(j)] = pick(G, groups.data(), j, [&](int64_t g) { return group_score[static_cast<size_t>(g)]; },
                                          [](int64_t) { return true; });
  const auto allowed = [&](int64_t e) {
    for (const int32_t g : groups)
      if (e / per == g) return true;
    return false;
  };
  real selected = 0.f;
  for (int64_t j = 0; j < k; ++j) {
    ix[j] = pick(E, ix, j, biased, allowed);
    w[j] = p[ix[j]];
    selected += w[j];
  }
  for (int64_t j = 0; j < k; ++j) w[j] = (r.norm_topk ? w[j] / (selected + 1e-20f) : w[j]) * r.scaling;
}

}  // namespace

void moe_route_forward(real* probs, int32_t* idx, real* weights, const real* logits, int64_t T,
                       const MoeRouting& r) {
  const int64_t E = r.experts, k = r.top_k;
  MT_ASSERT(k > 0 && k <= E && r.groups > 0 && E % r.groups == 0 && r.topk_groups <= r.groups);
#pragma omp parallel for if (T * E > parallel_min_elems) schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    if (r.sigmoid)
      sigmoid_route(probs + t * E, idx + t * k, weights + t * k, logits + t * E, r);
    else if (r.topk_softmax)
      topk_softmax_route(probs + t * E, idx + t * k, weights + t * k, logits + t * E, E, k);
    else
      softmax_route(probs + t * E, idx + t * k, weights + t * k, logits + t * E, r);
  }
}

void moe_route_backward(real* d_logits, const real* d_weights, const real* probs, const int32_t* idx,
                        const real* weights, const real* aux_grad, const int32_t* seq_lens, int64_t seq, int64_t T,
                        const MoeRouting& r) {
  const int64_t E = r.experts, k = r.top_k;
  const bool norm_topk = r.norm_topk;
  MT_ASSERT(!r.sigmoid || aux_grad == nullptr, "the sigmoid router has no load-balancing loss");
#pragma omp parallel for if (T * E > parallel_min_elems) schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    const real* p = probs + t * E;
    const real* w = weights + t * k;
    const real* dw = d_weights + t * k;
    const int32_t* ix = idx + t * k;
    real* dl = d_logits + t * E;
    // dp: ∂/∂probs. Renormalised weights w_j = c·p_j / S: ∂/∂p_j = (c/S)·(dw_j − Σ_i dw_i·w_i / c).
    std::vector<real> dp(static_cast<size_t>(E), 0.f);
    if (aux_grad != nullptr && valid_token(seq_lens, seq, t))
      for (int64_t e = 0; e < E; ++e) dp[static_cast<size_t>(e)] = aux_grad[e];
    if (r.topk_softmax) {
      // The aux loss through the full softmax p; the weights, a softmax of the k selected logits, directly.
      real pdp = 0.f, inner = 0.f;
      for (int64_t e = 0; e < E; ++e) pdp += p[e] * dp[static_cast<size_t>(e)];
      for (int64_t e = 0; e < E; ++e) dl[e] = p[e] * (dp[static_cast<size_t>(e)] - pdp);
      for (int64_t j = 0; j < k; ++j) inner += w[j] * dw[j];
      for (int64_t j = 0; j < k; ++j) dl[ix[j]] += w[j] * (dw[j] - inner);
      continue;
    }
    const real c = r.scaling;
    real inner = 0.f, selected = 0.f;
    if (norm_topk)
      for (int64_t j = 0; j < k; ++j) {
        inner += dw[j] * w[j];
        selected += p[ix[j]];
      }
    if (r.sigmoid) selected += 1e-20f;
    for (int64_t j = 0; j < k; ++j)
      dp[static_cast<size_t>(ix[j])] += norm_topk ? c * (dw[j] - inner / c) / selected : c * dw[j];
    if (r.sigmoid) {
      for (int64_t e = 0; e < E; ++e) dl[e] = p[e] * (1.f - p[e]) * dp[static_cast<size_t>(e)];
      continue;
    }
    real pdp = 0.f;
    for (int64_t e = 0; e < E; ++e) pdp += p[e] * dp[static_cast<size_t>(e)];
    for (int64_t e = 0; e < E; ++e) dl[e] = p[e] * (dp[static_cast<size_t>(e)] - pdp);
  }
}

void moe_router_stats(int32_t* counts, real* prob_sums, const real* probs, const int32_t* idx,
                      const int32_t* seq_lens, int64_t seq, int64_t T, int64_t E, int64_t k) {
  std::vector<double> sums(static_cast<size_t>(E), 0.0);
  for (int64_t t = 0; t < T; ++t) {
    if (!valid_token(seq_lens, seq, t)) continue;
    for (int64_t j = 0; j < k; ++j) ++counts[idx[t * k + j]];
    for (int64_t e = 0; e < E; ++e) sums[static_cast<size_t>(e)] += probs[t * E + e];
  }
  for (int64_t e = 0; e < E; ++e) prob_sums[e] += static_cast<real>(sums[static_cast<size_t>(e)]);
}

void moe_permute(int32_t* offsets, int32_t* source, int32_t* row_of, const int32_t* idx, int64_t T, int64_t E,
                 int64_t k) {
  const int64_t R = T * k;
  std::vector<int32_t> next(static_cast<size_t>(E) + 1, 0);
  for (int64_t r = 0; r < R; ++r) ++next[static_cast<size_t>(idx[r]) + 1];
  for (int64_t e = 0; e < E; ++e) next[static_cast<size_t>(e) + 1] += next[static_cast<size_t>(e)];
  for (int64_t e = 0; e <= E; ++e) offsets[e] = next[static_cast<size_t>(e)];
  for (int64_t r = 0; r < R; ++r) {  // routed rows in token order: stable within each expert
    const int32_t row = next[static_cast<size_t>(idx[r])]++;
    source[row] = static_cast<int32_t>(r);
    row_of[r] = row;
  }
}

void moe_gather(real* xs, const real* x, const int32_t* source, int64_t R, int64_t k, int64_t H) {
#pragma omp parallel for if (R * H > parallel_min_elems) schedule(static)
  for (int64_t r = 0; r < R; ++r) copy(xs + r * H, x + source[r] / k * H, H);
}

void moe_gather_backward(real* dx, const real* dxs, const int32_t* row_of, int64_t T, int64_t k, int64_t H,
                         bool accumulate) {
#pragma omp parallel for if (T * H > parallel_min_elems) schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    real* d = dx + t * H;
    if (!accumulate) zero(d, H);
    for (int64_t j = 0; j < k; ++j) axpy(d, 1.f, dxs + static_cast<int64_t>(row_of[t * k + j]) * H, H);
  }
}

void moe_combine_forward(real* y, const real* ys, const real* weights, const int32_t* row_of, int64_t T, int64_t k,
                         int64_t H) {
#pragma omp parallel for if (T * H > parallel_min_elems) schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    real* out = y + t * H;
    zero(out, H);
    for (int64_t j = 0; j < k; ++j)
      axpy(out, weights[t * k + j], ys + static_cast<int64_t>(row_of[t * k + j]) * H, H);
  }
}

void moe_combine_weights_backward(real* u, real* d_weights, const real* act, const real* weights,
                                  const int32_t* source, const int32_t* idx, const real* dy, const real* down_bias,
                                  int64_t R, int64_t k, int64_t I, int64_t H) {
#pragma omp parallel for if (R * I > parallel_min_elems) schedule(static)
  for (int64_t r = 0; r < R; ++r) {
    const int32_t routed = source[r];
    real* ur = u + r * I;
    real d = dot(ur, act + r * I, I);
    if (down_bias != nullptr) d += dot(dy + (routed / k) * H, down_bias + static_cast<int64_t>(idx[routed]) * H, H);
    d_weights[routed] = d;
    const real w = weights[routed];
    for (int64_t i = 0; i < I; ++i) ur[i] *= w;
  }
}

void grouped_linear_forward(real* y, const real* x, const real* w, int64_t w_stride, const int64_t* offsets,
                            int64_t E, int64_t I, int64_t O) {
  for (int64_t e = 0; e < E; ++e) {
    const int64_t r0 = offsets[e], rows = offsets[e + 1] - r0;
    if (rows > 0) linear_forward(y + r0 * O, x + r0 * I, w + e * w_stride, nullptr, rows, I, O);
  }
}

void grouped_linear_backward(real* dx, real* dw, const real* dy, const real* x, const real* w, int64_t w_stride,
                             const int64_t* offsets, int64_t E, int64_t I, int64_t O, bool accumulate_dx) {
  for (int64_t e = 0; e < E; ++e) {
    const int64_t r0 = offsets[e], rows = offsets[e + 1] - r0;
    if (rows > 0)
      linear_backward(dx ? dx + r0 * I : nullptr, dw + e * w_stride, nullptr, dy + r0 * O, x + r0 * I,
                      w + e * w_stride, rows, I, O, accumulate_dx, 1.0f);
  }
}

void grouped_bias_forward(real* y, const real* b, int64_t b_stride, const int32_t* offsets, int64_t E, int64_t R,
                          int64_t O) {
  MT_ASSERT(offsets[E] == R, "grouped_bias_forward: {} rows, offsets end at {}", R, offsets[E]);
  for (int64_t e = 0; e < E; ++e)
    for (int64_t r = offsets[e]; r < offsets[e + 1]; ++r) axpy(y + r * O, 1.f, b + e * b_stride, O);
}

void grouped_bias_backward(real* db, const real* dy, int64_t b_stride, const int32_t* offsets, int64_t E, int64_t R,
                           int64_t O) {
  MT_ASSERT(offsets[E] == R, "grouped_bias_backward: {} rows, offsets end at {}", R, offsets[E]);
  for (int64_t e = 0; e < E; ++e)
    for (int64_t r = offsets[e]; r < offsets[e + 1]; ++r) axpy(db + e * b_stride, 1.f, dy + r * O, O);
}

void row_sigmoid_gate_forward(real* y, const real* x, const real* g, int64_t T, int64_t H) {
#pragma omp parallel for if (T * H > parallel_min_elems) schedule(static)
  for (int64_t t = 0; t < T; ++t) axpy(y + t * H, 1.f / (1.f + std::exp(-g[t])), x + t * H, H);
}

void row_sigmoid_gate_backward(real* dx, real* dg, const real* dy, const real* x, const real* g, int64_t T,
                           int64_t H) {
#pragma omp parallel for if (T * H > parallel_min_elems) schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    const real s = 1.f / (1.f + std::exp(-g[t]));
    dg[t] = s * (1.f - s) * dot(x + t * H, dy + t * H, H);
    for (int64_t h = 0; h < H; ++h) dx[t * H + h] = s * dy[t * H + h];
  }
}

}  // namespace mt::cpu
