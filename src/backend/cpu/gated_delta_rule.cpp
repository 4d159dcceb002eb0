// The gated delta rule, token by token (the recurrent reference; transformers' torch_recurrent_gated_delta_rule
// with use_qk_l2norm_in_kernel): per sequence, v head and token, S ← exp(g)·S, δ = β·(v − Sᵀk̂), S ← S + k̂·δᵀ,
// o = Sᵀq̂, with k̂ = l2norm(k), q̂ = l2norm(q)/sqrt(d_k). Backward recomputes the states of a sequence and runs
// the recurrence in reverse.
// Invariant: S starts at zero at every sequence start and wherever the packed segment changes; tokens at or past a
// sequence's length produce o = 0 and zero gradients; the k heads of a group are owned by one thread (dq, dk of a k
// head sum its v heads in head order), so results do not depend on the thread count.
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"

namespace mt::cpu {

namespace {

constexpr real kL2Eps = 1e-6f;

real inv_norm(const real* x, int64_t n) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  return 1.f / std::sqrt(static_cast<real>(ss) + kL2Eps);
}

// One sequence's geometry for v head h.
struct HeadView {
  const DeltaRuleShape& s;
  int64_t b, h;
  int64_t row(int64_t t) const { return b * s.seq + t; }
  int64_t length() const { return s.seq_lens ? s.seq_lens[b] : s.seq; }
  int64_t k_head() const { return h / (s.n_v_heads / s.n_k_heads); }
  bool segment_start(int64_t t) const {
    return t == 0 || (s.segments && s.segments[row(t)] != s.segments[row(t) - 1]);
  }
};

// q̂ (scaled), k̂ of token t for view v: normalised copies.
void normalized_qk(const real* qkv, const HeadView& v, int64_t t, real* qh, real* kh) {
  const DeltaRuleShape& s = v.s;
  const int64_t dk = s.k_head_dim;
  const real* q = qkv + v.row(t) * s.row() + v.k_head() * dk;
  const real* k = q + s.key_dim();
  const real rq = inv_norm(q, dk) / std::sqrt(static_cast<real>(dk)), rk = inv_norm(k, dk);
  for (int64_t i = 0; i < dk; ++i) {
    qh[i] = q[i] * rq;
    kh[i] = k[i] * rk;
  }
}

// One step on S [dk, dv]: decay, delta update; u = Sᵀk̂ after the decay, delta = β(v − u).
void step(real* S, const real* kh, const real* vt, real decay, real beta, int64_t dk, int64_t dv, real* u,
          real* delta) {
  for (int64_t i = 0; i < dk * dv; ++i) S[i] *= decay;
  for (int64_t j = 0; j < dv; ++j) u[j] = 0.f;
  for (int64_t i = 0; i < dk; ++i) axpy(u, kh[i], S + i * dv, dv);
  for (int64_t j = 0; j < dv; ++j) delta[j] = beta * (vt[j] - u[j]);
  for (int64_t i = 0; i < dk; ++i) axpy(S + i * dv, kh[i], delta, dv);
}

// dx of y = x·r (r = 1/sqrt(Σx² + eps)) given dy, times `scale`: dx += scale·(r·dy − x·r³·(x·dy)).
void l2norm_backward(real* dx, const real* x, const real* dy, int64_t n, real scale) {
  const real r = inv_norm(x, n);
  double xdy = 0.0;
  for (int64_t i = 0; i < n; ++i) xdy += static_cast<double>(x[i]) * dy[i];
  const real c = static_cast<real>(xdy) * r * r * r;
  for (int64_t i = 0; i < n; ++i) dx[i] += scale * (r * dy[i] - x[i] * c);
}

}  // namespace

void gated_delta_rule_forward(real* o, const real* qkv, const real* g, const real* beta, const DeltaRuleShape& s) {
  MT_ASSERT(s.n_k_heads > 0 && s.n_v_heads % s.n_k_heads == 0 && s.k_head_dim > 0 && s.v_head_dim > 0);
  const int64_t dk = s.k_head_dim, dv = s.v_head_dim, nv = s.n_v_heads, vd = s.value_dim();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < nv; ++h) {
      const HeadView v{s, b, h};
      std::vector<real> S(static_cast<size_t>(dk * dv)), qh(static_cast<size_t>(dk)), kh(static_cast<size_t>(dk)),
          u(static_cast<size_t>(dv)), delta(static_cast<size_t>(dv));
      for (int64_t t = 0; t < s.seq; ++t) {
        real* out = o + v.row(t) * vd + h * dv;
        if (t >= v.length()) {
          for (int64_t j = 0; j < dv; ++j) out[j] = 0.f;
          continue;
        }
        if (v.segment_start(t)) std::fill(S.begin(), S.end(), 0.f);
        normalized_qk(qkv, v, t, qh.data(), kh.data());
        const real* vt = qkv + v.row(t) * s.row() + 2 * s.key_dim() + h * dv;
        step(S.data(), kh.data(), vt, std::exp(g[v.row(t) * nv + h]), beta[v.row(t) * nv + h], dk, dv, u.data(),
             delta.data());
        for (int64_t j = 0; j < dv; ++j) out[j] = 0.f;
        for (int64_t i = 0; i < dk; ++i) axpy(out, qh[static_cast<size_t>(i)], S.data() + i * dv, dv);
      }
    }
}

void gated_delta_rule_backward(real* d_qkv, real* dg, real* dbeta, const real* d_o, const real* qkv,
                               const real* g, const real* beta, const DeltaRuleShape& s) {
  MT_ASSERT(s.n_k_heads > 0 && s.n_v_heads % s.n_k_heads == 0 && s.k_head_dim > 0 && s.v_head_dim > 0);
  const int64_t dk = s.k_head_dim, dv = s.v_head_dim, nv = s.n_v_heads, vd = s.value_dim(), R = s.row();
  const int64_t group = nv / s.n_k_heads, T = s.batch * s.seq;
  zero(d_qkv, T * R);
  zero(dg, T * nv);
  zero(dbeta, T * nv);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t kh_index = 0; kh_index < s.n_k_heads; ++kh_index) {
      const int64_t L = s.seq_lens ? s.seq_lens[b] : s.seq;
      std::vector<real> states(static_cast<size_t>(L * dk * dv));  // S after each token
      std::vector<real> dS(static_cast<size_t>(dk * dv)), Sp(static_cast<size_t>(dk * dv));
      std::vector<real> qh(static_cast<size_t>(dk)), kh(static_cast<size_t>(dk)), u(static_cast<size_t>(dv)),
          delta(static_cast<size_t>(dv)), dqh(static_cast<size_t>(dk)), dkh(static_cast<size_t>(dk)),
          ddelta(static_cast<size_t>(dv)), du(static_cast<size_t>(dv));
      for (int64_t h = kh_index * group; h < (kh_index + 1) * group; ++h) {
        const HeadView v{s, b, h};
        // Forward again, keeping every state.
        std::vector<real> S(static_cast<size_t>(dk * dv));
        for (int64_t t = 0; t < L; ++t) {
          if (v.segment_start(t)) std::fill(S.begin(), S.end(), 0.f);
          normalized_qk(qkv, v, t, qh.data(), kh.data());
          const real* vt = qkv + v.row(t) * R + 2 * s.key_dim() + h * dv;
          step(S.data(), kh.data(), vt, std::exp(g[v.row(t) * nv + h]), beta[v.row(t) * nv + h], dk, dv, u.data(),
               delta.data());
          std::copy(S.begin(), S.end(), states.begin() + t * dk * dv);
        }
        // Reverse.
        std::fill(dS.begin(), dS.end(), 0.f);
        for (int64_t t = L - 1; t >= 0; --t) {
          const int64_t row = v.row(t);
          const real* St = states.data() + t * dk * dv;
          const real* dout = d_o + row * vd + h * dv;
          const real* vt = qkv + row * R + 2 * s.key_dim() + h * dv;
          const real decay = std::exp(g[row * nv + h]), bt = beta[row * nv + h];
          normalized_qk(qkv, v, t, qh.data(), kh.data());
          // S' = decay·S_{t−1} (zero at a segment start), u = S'ᵀk̂, δ = β(v − u).
          if (v.segment_start(t))
            std::fill(Sp.begin(), Sp.end(), 0.f);
          else
            for (int64_t i = 0; i < dk * dv; ++i) Sp[static_cast<size_t>(i)] = decay * (St - dk * dv)[i];  // S_{t−1}
          for (int64_t j = 0; j < dv; ++j) u[static_cast<size_t>(j)] = 0.f;
          for (int64_t i = 0; i < dk; ++i) axpy(u.data(), kh[static_cast<size_t>(i)], Sp.data() + i * dv, dv);
          for (int64_t j = 0; j < dv; ++j) delta[static_cast<size_t>(j)] = bt * (vt[j] - u[static_cast<size_t>(j)]);
          // o = S_tᵀq̂
          for (int64_t i = 0; i < dk; ++i) {
            dqh[static_cast<size_t>(i)] = dot(St + i * dv, dout, dv);
            axpy(dS.data() + i * dv, qh[static_cast<size_t>(i)], dout, dv);
          }
          // S_t = S' + k̂δᵀ
          for (int64_t j = 0; j < dv; ++j) ddelta[static_cast<size_t>(j)] = 0.f;
          for (int64_t i = 0; i < dk; ++i) {
            dkh[static_cast<size_t>(i)] = dot(dS.data() + i * dv, delta.data(), dv);
            axpy(ddelta.data(), kh[static_cast<size_t>(i)], dS.data() + i * dv, dv);
          }
          // δ = β(v − u)
          real* dvt = d_qkv + row * R + 2 * s.key_dim() + h * dv;
          double db = 0.0;
          for (int64_t j = 0; j < dv; ++j) {
            dvt[j] = bt * ddelta[static_cast<size_t>(j)];
            db += static_cast<double>(ddelta[static_cast<size_t>(j)]) * (vt[j] - u[static_cast<size_t>(j)]);
            du[static_cast<size_t>(j)] = -bt * ddelta[static_cast<size_t>(j)];
          }
          dbeta[row * nv + h] = static_cast<real>(db);
          // u = S'ᵀk̂
          for (int64_t i = 0; i < dk; ++i) {
            dkh[static_cast<size_t>(i)] += dot(Sp.data() + i * dv, du.data(), dv);
            axpy(dS.data() + i * dv, kh[static_cast<size_t>(i)], du.data(), dv);
          }
          // S' = decay·S_{t−1}: dg = Σ dS'·S'; dS_{t−1} = decay·dS' (zero across a segment start).
          double dgt = 0.0;
          for (int64_t i = 0; i < dk * dv; ++i) dgt += static_cast<double>(dS[static_cast<size_t>(i)]) * Sp[static_cast<size_t>(i)];
          dg[row * nv + h] = static_cast<real>(dgt);
          if (v.segment_start(t))
            std::fill(dS.begin(), dS.end(), 0.f);
          else
            for (real& x : dS) x *= decay;
          // Back through the normalisations into the raw q, k of the group's k head.
          const real* q = qkv + row * R + kh_index * dk;
          l2norm_backward(d_qkv + row * R + kh_index * dk, q, dqh.data(), dk, 1.f / std::sqrt(static_cast<real>(dk)));
          l2norm_backward(d_qkv + row * R + s.key_dim() + kh_index * dk, q + s.key_dim(), dkh.data(), dk, 1.f);
        }
      }
    }
}

}  // namespace mt::cpu
