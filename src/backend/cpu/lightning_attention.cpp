// Lightning attention (MiniMax), token by token: the recurrent form of transformers' block-wise
// MiniMaxLightningAttention (the same sums: within a block exp(−λ(i − j)), across blocks the decayed state). With
// q, k, v = silu(raw), per sequence, head and packed segment, o_t = Σ_{s≤t} w^(t−s)·(q_t·k_s)·v_s, w = exp(−λ_h).
// Every sum of the forward and the backward is one decayed sweep y_t = Σ_s w^|t−s|·(a_t·b_s)·c_s over a segment,
// forward (s ≤ t) or reverse (s ≥ t), with the running state M = Σ_s w^|t−s|·b_s·c_sᵀ:
//   o  = sweep(q, k, v) forward;      dq = sweep(do, v, k) forward;
//   dk = sweep(v, do, q) reverse;     dv = sweep(k, q, do) reverse;
// then d_raw = d·silu'(raw). No state is stored: the backward is exact, not a recurrence run backwards.
// Invariant: M starts at zero at every sequence start and wherever the packed segment changes; tokens at or past a
// sequence's length produce o = 0 and zero gradients; one thread owns a (sequence, head), so results do not depend
// on the thread count.
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"

namespace mt::cpu {

namespace {


// One (sequence, head): its valid tokens' silu(q), silu(k), silu(v) as [length, d] arrays, and its decay per token.
struct HeadRows {
  const LightningShape& s;
  int64_t b, h, length;
  real w;  // exp(−λ_h)
  std::vector<real> q, k, v;

  HeadRows(const LightningShape& shape, const real* qkv, int64_t seq, int64_t head)
      : s(shape), b(seq), h(head), length(shape.seq_lens ? shape.seq_lens[seq] : shape.seq),
        w(std::exp(-static_cast<real>(lightning_decay_rate(head, shape.n_heads, shape.decay_factor)))) {
    const int64_t d = s.head_dim;
    for (std::vector<real>* p : {&q, &k, &v}) p->resize(static_cast<size_t>(length * d));
    for (int64_t t = 0; t < length; ++t) {
      const real* raw = qkv + row(t) * s.row() + h * 3 * d;
      for (int64_t i = 0; i < d; ++i) {
        q[t * d + i] = raw[i] * sigmoid(raw[i]);
        k[t * d + i] = raw[d + i] * sigmoid(raw[d + i]);
        v[t * d + i] = raw[2 * d + i] * sigmoid(raw[2 * d + i]);
      }
    }
  }
  int64_t row(int64_t t) const { return b * s.seq + t; }
  // Where the segment of token t ends: the first token after it in another packed example (or the length).
  int64_t segment_end(int64_t t) const {
    int64_t e = t + 1;
    while (e < length && !(s.segments && s.segments[row(e)] != s.segments[row(t)])) ++e;
    return e;
  }
};

// y_t = Σ_s w^|t−s|·(a_t·b_s)·c_s for t, s in [begin, end), s ≤ t (forward) or s ≥ t (reverse); rows of d.
void decayed_sweep(real* y, const real* a, const real* b, const real* c, int64_t begin, int64_t end, int64_t d,
                   real w, bool reverse, std::vector<real>& M) {
  std::fill(M.begin(), M.end(), real(0));
  for (int64_t n = 0; n < end - begin; ++n) {
    const int64_t t = reverse ? end - 1 - n : begin + n;
    for (int64_t i = 0; i < d; ++i) {
      real* m = M.data() + i * d;
      for (int64_t j = 0; j < d; ++j) m[j] = w * m[j] + b[t * d + i] * c[t * d + j];
    }
    real* yt = y + t * d;
    for (int64_t j = 0; j < d; ++j) yt[j] = 0.f;
    for (int64_t i = 0; i < d; ++i) axpy(yt, a[t * d + i], M.data() + i * d, d);
  }
}

// f(begin, end) for each packed segment of the head's valid tokens.
template <typename F>
void each_segment(const HeadRows& r, F f) {
  for (int64_t t = 0; t < r.length;) {
    const int64_t e = r.segment_end(t);
    f(t, e);
    t = e;
  }
}

void check_shape(const LightningShape& s) {
  MT_ASSERT(s.batch >= 0 && s.seq >= 0 && s.n_heads > 0 && s.head_dim > 0, "lightning attention: batch {} seq {} "
            "heads {} head_dim {}", s.batch, s.seq, s.n_heads, s.head_dim);
}

}  // namespace

void lightning_attention_forward(real* o, const real* qkv, const LightningShape& s) {
  check_shape(s);
  const int64_t d = s.head_dim;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.n_heads; ++h) {
      const HeadRows r(s, qkv, b, h);
      std::vector<real> M(static_cast<size_t>(d * d)), y(static_cast<size_t>(r.length * d));
      each_segment(r, [&](int64_t t0, int64_t t1) {
        decayed_sweep(y.data(), r.q.data(), r.k.data(), r.v.data(), t0, t1, d, r.w, false, M);
      });
      for (int64_t t = 0; t < s.seq; ++t)
        for (int64_t j = 0; j < d; ++j) o[r.row(t) * s.width() + h * d + j] = t < r.length ? y[t * d + j] : 0.f;
    }
}

void lightning_attention_backward(real* d_qkv, const real* d_o, const real* qkv, const LightningShape& s) {
  check_shape(s);
  const int64_t d = s.head_dim;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.n_heads; ++h) {
      const HeadRows r(s, qkv, b, h);
      const auto n = static_cast<size_t>(r.length * d);
      std::vector<real> M(static_cast<size_t>(d * d)), dout(n), dq(n), dk(n), dv(n);
      for (int64_t t = 0; t < r.length; ++t)
        for (int64_t j = 0; j < d; ++j) dout[t * d + j] = d_o[r.row(t) * s.width() + h * d + j];
      each_segment(r, [&](int64_t t0, int64_t t1) {
        decayed_sweep(dq.data(), dout.data(), r.v.data(), r.k.data(), t0, t1, d, r.w, false, M);
        decayed_sweep(dk.data(), r.v.data(), dout.data(), r.q.data(), t0, t1, d, r.w, true, M);
        decayed_sweep(dv.data(), r.k.data(), r.q.data(), dout.data(), t0, t1, d, r.w, true, M);
      });
      for (int64_t t = 0; t < s.seq; ++t) {
        real* dst = d_qkv + r.row(t) * s.row() + h * 3 * d;
        const real* raw = qkv + r.row(t) * s.row() + h * 3 * d;
        int64_t part = 0;
        for (const std::vector<real>* g : {&dq, &dk, &dv}) {
          for (int64_t i = 0; i < d; ++i) {
            const real x = raw[part * d + i], sg = sigmoid(x);
            dst[part * d + i] = t < r.length ? (*g)[t * d + i] * sg * (1.f + x * (1.f - sg)) : 0.f;
          }
          ++part;
        }
      }
    }
}

}  // namespace mt::cpu
