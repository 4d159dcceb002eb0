// Causal softmax attention with GQA, sliding window, right padding and packed segments, a custom logit scale, Gemma 2
// logit soft-capping, ALiBi biases and attention sinks (GPT-OSS: a per-head logit in the softmax denominator, no
// value); the value head dim may differ from the query/key one (multi-head latent attention); one query row at a time.
// Invariant: never materialises more than one score row per thread; forward tasks own one query row of one head;
// backward tasks own (batch, kv head) and every query head sharing it, so dk/dv sums are race-free and in a fixed
// order — or, where those tasks would leave most threads idle (long rows, few heads), the backward runs as two passes,
// dq by query row and dk/dv by key row, each summing in exactly the order of the one pass (keys ascending for a dq
// row; query heads, then queries ascending, for a dk/dv row), so the bits are the same either way. Without
// soft-capping and ALiBi the kernels are instantiated with those steps compiled out, so that path runs exactly the
// operations it always has.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"

namespace mt::cpu {
namespace {

void check_shape(const AttnShape& s) {
  MT_ASSERT(s.batch > 0 && s.seq > 0 && s.head_dim > 0 && s.v_head_dim >= 0 && s.window >= 0);
  MT_ASSERT(std::isfinite(s.scale) && s.scale >= 0.f, "attention scale {}", s.scale);
  MT_ASSERT(std::isfinite(s.softcap) && s.softcap >= 0.f, "attention softcap {}", s.softcap);
  MT_ASSERT(s.n_kv_heads > 0 && s.n_heads % s.n_kv_heads == 0, "n_heads {} n_kv_heads {}", s.n_heads,
            s.n_kv_heads);
  if (s.seq_lens == nullptr) return;
  for (int64_t b = 0; b < s.batch; ++b) {
    MT_ASSERT(s.seq_lens[b] >= 0 && s.seq_lens[b] <= s.seq, "seq_lens[{}] = {} outside [0, {}]", b, s.seq_lens[b],
              s.seq);
  }
}

int64_t valid_len(const AttnShape& s, int64_t b) { return s.seq_lens != nullptr ? s.seq_lens[b] : s.seq; }

// First key position query i may see (the window bound); keys run from here to i.
int64_t first_key(const AttnShape& s, int64_t i) { return s.window > 0 ? std::max<int64_t>(0, i - s.window + 1) : 0; }

// Whether key j and query i (positions in sequence b) lie in the same packed example.
bool same_segment(const AttnShape& s, int64_t b, int64_t i, int64_t j) {
  return s.segments == nullptr || s.segments[b * s.seq + j] == s.segments[b * s.seq + i];
}

// PyTorch multiplies fp32 scores by the Python float head_dim**-0.5, rounded to fp32; a given scale is used as is.
real softmax_scale(const AttnShape& s) {
  if (s.scale != 0.f) return s.scale;
  return static_cast<real>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
}

// Whether the logits go through soft-capping or ALiBi (the kernels' Ext instantiation).
bool extended_logits(const AttnShape& s) { return s.softcap > 0.f || s.alibi_slopes != nullptr; }

// Head h's ALiBi slope (0 without ALiBi, and in the plain instantiation).
template <bool Ext>
real head_slope(const AttnShape& s, int64_t h) {
  return Ext && s.alibi_slopes != nullptr ? s.alibi_slopes[h] : 0.f;
}

// The final logit of query i, key j from the scaled score `raw`: Gemma 2's softcap·tanh(raw/softcap) (divide, tanh,
// multiply, as its eager attention), then + slope·(j − i). *dcap gets ∂logit/∂raw = 1 − tanh² (1 without a cap).
real final_logit(const AttnShape& s, real raw, real slope, int64_t i, int64_t j, real* dcap) {
  real logit = raw;
  *dcap = 1.f;
  if (s.softcap > 0.f) {
    const real t = std::tanh(raw / s.softcap);
    logit = s.softcap * t;
    *dcap = 1.f - t * t;
  }
  if (s.alibi_slopes != nullptr) logit += slope * static_cast<real>(j - i);
  return logit;
}

template <bool Ext>
void forward_impl(real* out, real* lse, const real* q, const real* k, const real* v, const AttnShape& s) {
  const int64_t hd = s.head_dim, vd = s.value_head_dim(), group = s.n_heads / s.n_kv_heads;
  const int64_t q_stride = s.n_heads * hd, kv_stride = s.n_kv_heads * hd;
  const int64_t o_stride = s.n_heads * vd, v_stride = s.n_kv_heads * vd;
  const real scale = softmax_scale(s);
  constexpr real neg_inf = -std::numeric_limits<real>::infinity();
#pragma omp parallel
  {
    std::vector<real> p(static_cast<size_t>(s.seq));
#pragma omp for collapse(3) schedule(dynamic, 16)
    for (int64_t b = 0; b < s.batch; ++b) {
      for (int64_t h = 0; h < s.n_heads; ++h) {
        for (int64_t i = 0; i < s.seq; ++i) {
          const int64_t len = valid_len(s, b), kv_off = (h / group) * hd;
          const real slope = head_slope<Ext>(s, h);
          const real sink = s.sinks != nullptr ? static_cast<const real*>(s.sinks)[h] : neg_inf;
          real* o = out + (b * s.seq + i) * o_stride + h * vd;
          real& l = lse[(b * s.n_heads + h) * s.seq + i];
          std::fill(o, o + vd, 0.f);
          if (i >= len) {
            l = 0.f;
            continue;
          }
          const real* qi = q + (b * s.seq + i) * q_stride + h * hd;
          const int64_t lo = first_key(s, i);
          real m = sink;
          for (int64_t j = lo; j <= i; ++j) {
            if constexpr (Ext) {
              real dcap;
              p[j] = same_segment(s, b, i, j)
                         ? final_logit(s, dot(qi, k + (b * s.seq + j) * kv_stride + kv_off, hd) * scale, slope, i, j,
                                       &dcap)
                         : neg_inf;
            } else {
              p[j] = same_segment(s, b, i, j) ? dot(qi, k + (b * s.seq + j) * kv_stride + kv_off, hd) * scale
                                              : neg_inf;
            }
            m = std::max(m, p[j]);
          }
          double sum = s.sinks != nullptr ? std::exp(sink - m) : 0.0;
          for (int64_t j = lo; j <= i; ++j) {
            p[j] = std::exp(p[j] - m);
            sum += p[j];
          }
          const real inv = static_cast<real>(1.0 / sum);
          for (int64_t j = lo; j <= i; ++j) {
            if (p[j] != 0.f) axpy(o, p[j] * inv, v + (b * s.seq + j) * v_stride + (h / group) * vd, vd);
          }
          l = m + static_cast<real>(std::log(sum));
        }
      }
    }
  }
}

// The gradient terms of query i (head h) and key j: p, and ds_raw = p · (dO_i·v_j − D_i) (through the tanh where
// capped), from the pair's recomputed logit.
struct PairGrad {
  real p, ds;
};
template <bool Ext>
PairGrad pair_grad(const AttnShape& s, const real* qi, const real* doi, real di, real lse_i, const real* kj,
                   const real* vj, real scale, real slope, int64_t i, int64_t j) {
  const int64_t hd = s.head_dim, vd = s.value_head_dim();
  if constexpr (Ext) {
    real dcap;
    const real logit = final_logit(s, dot(qi, kj, hd) * scale, slope, i, j, &dcap);
    const real p = std::exp(logit - lse_i);
    return {p, p * (dot(doi, vj, vd) - di) * dcap};
  } else {
    const real p = std::exp(dot(qi, kj, hd) * scale - lse_i);
    return {p, p * (dot(doi, vj, vd) - di)};
  }
}

// One pass: tasks own (batch, kv head) and the query heads sharing it.
template <bool Ext>
void backward_by_kv_head(real* dq, real* dk, real* dv, const real* dout, const real* q, const real* k,
                         const real* v, const real* out, const real* lse, const AttnShape& s) {
  const int64_t hd = s.head_dim, vd = s.value_head_dim(), group = s.n_heads / s.n_kv_heads;
  const int64_t q_stride = s.n_heads * hd, kv_stride = s.n_kv_heads * hd;
  const int64_t o_stride = s.n_heads * vd, v_stride = s.n_kv_heads * vd;
  const real scale = softmax_scale(s);
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t kvh = 0; kvh < s.n_kv_heads; ++kvh) {
      const int64_t len = valid_len(s, b), kv_off = kvh * hd, v_off = kvh * vd;
      for (int64_t j = 0; j < s.seq; ++j) {
        std::fill_n(dk + (b * s.seq + j) * kv_stride + kv_off, hd, 0.f);
        std::fill_n(dv + (b * s.seq + j) * v_stride + v_off, vd, 0.f);
      }
      for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
        const real slope = head_slope<Ext>(s, h);
        for (int64_t i = 0; i < s.seq; ++i) {
          const int64_t row = (b * s.seq + i) * q_stride + h * hd, o_row = (b * s.seq + i) * o_stride + h * vd;
          real* dqi = dq + row;
          std::fill_n(dqi, hd, 0.f);
          if (i >= len) continue;
          const real* qi = q + row;
          const real* doi = dout + o_row;
          const real di = dot(doi, out + o_row, vd);
          const real lse_i = lse[(b * s.n_heads + h) * s.seq + i];
          for (int64_t j = first_key(s, i); j <= i; ++j) {
            if (!same_segment(s, b, i, j)) continue;
            const int64_t kv_row = (b * s.seq + j) * kv_stride + kv_off, v_row = (b * s.seq + j) * v_stride + v_off;
            const PairGrad g = pair_grad<Ext>(s, qi, doi, di, lse_i, k + kv_row, v + v_row, scale, slope, i, j);
            axpy(dqi, scale * g.ds, k + kv_row, hd);
            axpy(dk + kv_row, scale * g.ds, qi, hd);
            axpy(dv + v_row, g.p, doi, vd);
          }
        }
      }
    }
  }
}

// Two passes over every (query, key) pair: dq by query row, then dk/dv by key row, in backward_by_kv_head's orders.
template <bool Ext>
void backward_by_rows(real* dq, real* dk, real* dv, const real* dout, const real* q, const real* k,
                      const real* v, const real* out, const real* lse, const AttnShape& s) {
  const int64_t hd = s.head_dim, vd = s.value_head_dim(), group = s.n_heads / s.n_kv_heads;
  const int64_t q_stride = s.n_heads * hd, kv_stride = s.n_kv_heads * hd;
  const int64_t o_stride = s.n_heads * vd, v_stride = s.n_kv_heads * vd;
  const real scale = softmax_scale(s);
  std::vector<real> d(static_cast<size_t>(s.batch * s.n_heads * s.seq));  // D_i = dO_i·O_i, [b, h, seq]
#pragma omp parallel for collapse(3) schedule(static)
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.n_heads; ++h)
      for (int64_t i = 0; i < s.seq; ++i) {
        const int64_t o_row = (b * s.seq + i) * o_stride + h * vd;
        d[static_cast<size_t>((b * s.n_heads + h) * s.seq + i)] = dot(dout + o_row, out + o_row, vd);
      }
#pragma omp parallel for collapse(3) schedule(dynamic, 16)
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.n_heads; ++h)
      for (int64_t i = 0; i < s.seq; ++i) {
        const int64_t row = (b * s.seq + i) * q_stride + h * hd, kv_off = (h / group) * hd;
        const int64_t o_row = (b * s.seq + i) * o_stride + h * vd, v_off = (h / group) * vd;
        real* dqi = dq + row;
        std::fill_n(dqi, hd, 0.f);
        if (i >= valid_len(s, b)) continue;
        const real slope = head_slope<Ext>(s, h);
        const int64_t at = (b * s.n_heads + h) * s.seq + i;
        for (int64_t j = first_key(s, i); j <= i; ++j) {
          if (!same_segment(s, b, i, j)) continue;
          const int64_t kv_row = (b * s.seq + j) * kv_stride + kv_off;
          const PairGrad g = pair_grad<Ext>(s, q + row, dout + o_row, d[static_cast<size_t>(at)], lse[at], k + kv_row,
                                            v + (b * s.seq + j) * v_stride + v_off, scale, slope, i, j);
          axpy(dqi, scale * g.ds, k + kv_row, hd);
        }
      }
#pragma omp parallel for collapse(3) schedule(dynamic, 16)
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t kvh = 0; kvh < s.n_kv_heads; ++kvh)
      for (int64_t j = 0; j < s.seq; ++j) {
        const int64_t kv_row = (b * s.seq + j) * kv_stride + kvh * hd, len = valid_len(s, b);
        const int64_t v_row = (b * s.seq + j) * v_stride + kvh * vd;
        real* dkj = dk + kv_row;
        real* dvj = dv + v_row;
        std::fill_n(dkj, hd, 0.f);
        std::fill_n(dvj, vd, 0.f);
        // The queries that see key j: from j up to the window's end, within the valid length.
        const int64_t last = s.window > 0 ? std::min(len, j + s.window) : len;
        for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
          const real slope = head_slope<Ext>(s, h);
          for (int64_t i = j; i < last; ++i) {
            if (!same_segment(s, b, i, j)) continue;
            const int64_t row = (b * s.seq + i) * q_stride + h * hd, at = (b * s.n_heads + h) * s.seq + i;
            const int64_t o_row = (b * s.seq + i) * o_stride + h * vd;
            const PairGrad g = pair_grad<Ext>(s, q + row, dout + o_row, d[static_cast<size_t>(at)], lse[at],
                                              k + kv_row, v + v_row, scale, slope, i, j);
            axpy(dkj, scale * g.ds, q + row, hd);
            axpy(dvj, g.p, dout + o_row, vd);
          }
        }
      }
}

// backward_by_rows where (batch, kv head) tasks would keep fewer than half the threads busy.
template <bool Ext>
void backward_impl(real* dq, real* dk, real* dv, const real* dout, const real* q, const real* k,
                   const real* v, const real* out, const real* lse, const AttnShape& s) {
  if (2 * s.batch * s.n_kv_heads < omp_get_max_threads())
    backward_by_rows<Ext>(dq, dk, dv, dout, q, k, v, out, lse, s);
  else
    backward_by_kv_head<Ext>(dq, dk, dv, dout, q, k, v, out, lse, s);
}

}  // namespace

void attention_sinks_backward(real* d_sinks, const real* dout, const real* out, const real* lse,
                              const AttnShape& s) {
  check_shape(s);
  MT_ASSERT(s.sinks != nullptr, "attention_sinks_backward without sinks");
  const auto* sinks = static_cast<const real*>(s.sinks);
  const int64_t vd = s.value_head_dim(), o_stride = s.n_heads * vd;
#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < s.n_heads; ++h) {
    double acc = 0.0;
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t i = 0; i < valid_len(s, b); ++i) {
        const int64_t row = (b * s.seq + i) * o_stride + h * vd;
        const real p = std::exp(sinks[h] - lse[(b * s.n_heads + h) * s.seq + i]);
        acc += static_cast<double>(p * dot(dout + row, out + row, vd));
      }
    d_sinks[h] -= static_cast<real>(acc);
  }
}

void attention_forward(real* out, real* lse, const real* q, const real* k, const real* v,
                       const AttnShape& shape) {
  check_shape(shape);
  if (extended_logits(shape)) {
    forward_impl<true>(out, lse, q, k, v, shape);
  } else {
    forward_impl<false>(out, lse, q, k, v, shape);
  }
}

void attention_backward(real* dq, real* dk, real* dv, const real* dout, const real* q, const real* k,
                        const real* v, const real* out, const real* lse, const AttnShape& shape) {
  check_shape(shape);
  if (extended_logits(shape)) {
    backward_impl<true>(dq, dk, dv, dout, q, k, v, out, lse, shape);
  } else {
    backward_impl<false>(dq, dk, dv, dout, q, k, v, out, lse, shape);
  }
}

}  // namespace mt::cpu
