// The gated delta rule in chunked form, forward and backward: the WY / UT-transform representation
// flash-linear-attention's chunk kernels use, stage by stage as kernels/ops/gated_delta_rule_chunked.cu computes it, so
// the tests check the CUDA kernels' algorithm (its fixed chunks, segment masks and backward) against the recurrent
// reference. Per sequence, v head and chunk of C tokens (the last one of a sequence shorter), with q̂, k̂ normalised:
//   γ_r   cumulative log decay from the start of r's segment within the chunk (a segment start restarts it);
//   D     D[r, s] = exp(γ_r − γ_s) where r, s are in the same segment, else 0;
//   Γ_r   exp(γ_r) where r is in the segment the incoming state carries into (the chunk's first segment, unless the
//         chunk's first token starts a segment), else 0; e_s = exp(γ_last − γ_s) in the last token's segment, else 0;
//   A     A[r, s] = β_r·(k̂_r·k̂_s)·D[r, s] for s < r; T = (I + A)⁻¹ (forward substitution);
//   U = T·(β ⊙ V), W = T·(βΓ ⊙ K̂), V' = U − W·S, O = (Γ ⊙ Q̂)·S + (Q̂K̂ᵀ ⊙ D, s ≤ r)·V',
//   S ← Γ_last·S + (e ⊙ K̂)ᵀ·V'.
// Backward: the states S_c entering each chunk and V' again, then the state gradient chunk by chunk in reverse
// (dV' = (Q̂K̂ᵀ ⊙ D)ᵀ·dO + (e ⊙ K̂)·dS, dS ← Γ_last·dS + (Γ ⊙ Q̂)ᵀ·dO − Wᵀ·dV'), then per chunk the gradients of
// q̂, k̂, v, β and γ (dg is γ's gradient summed from each token to its segment's end), the v heads' dq̂, dk̂ summed
// per k head in head order and taken back through the normalisations.
// Invariant: the results of the recurrent form (gated_delta_rule.cpp) up to rounding: state zero at every sequence
// and segment start, padded tokens give o = 0 and zero gradients.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"

namespace mt::cpu {

namespace {

using Mat = std::vector<real>;

real inv_norm(const real* x, int64_t n) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  return 1.f / std::sqrt(static_cast<real>(ss) + 1e-6f);
}

// C[M, N] (+)= op(A)·op(B), row-major: A is [M, K] ([K, M] when ta), B is [K, N] ([N, K] when tb).
void mm(real* C, const real* A, const real* B, int64_t M, int64_t N, int64_t K, bool ta, bool tb, bool acc) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      real s = acc ? C[m * N + n] : 0.f;
      for (int64_t k = 0; k < K; ++k) s += (ta ? A[k * M + m] : A[m * K + k]) * (tb ? B[n * K + k] : B[k * N + n]);
      C[m * N + n] = s;
    }
}

// One chunk's gates and masks (see the file comment); rows at or past n are padding.
struct ChunkGates {
  int64_t t0 = 0, n = 0;
  bool carries = false;                   // the incoming state reaches the chunk's first segment
  std::vector<int> seg;                   // segment index within the chunk, 0 for the first; padding its own
  std::vector<real> beta, gam, Gam, e;   // [C]
  real Gam_last = 0.f;
  real D(int64_t r, int64_t s) const { return seg[r] == seg[s] ? std::exp(gam[r] - gam[s]) : 0.f; }
};

ChunkGates chunk_gates(const real* g, const real* beta, const DeltaRuleShape& s, int64_t b, int64_t h, int64_t c,
                       int64_t C) {
  ChunkGates q;
  const int64_t L = s.seq_lens ? s.seq_lens[b] : s.seq, nv = s.n_v_heads;
  q.t0 = c * C;
  q.n = std::clamp<int64_t>(L - q.t0, 0, C);
  q.seg.assign(C, 0);
  q.beta.assign(C, 0.f);
  q.gam.assign(C, 0.f);
  q.Gam.assign(C, 0.f);
  q.e.assign(C, 0.f);
  const auto starts = [&](int64_t t) {
    return t == 0 || (s.segments && s.segments[b * s.seq + t] != s.segments[b * s.seq + t - 1]);
  };
  for (int64_t r = 0; r < q.n; ++r) {
    const int64_t row = b * s.seq + q.t0 + r;
    const bool restart = r > 0 && starts(q.t0 + r);
    q.seg[r] = r == 0 ? 0 : q.seg[r - 1] + (restart ? 1 : 0);
    q.gam[r] = (r == 0 || restart ? 0.f : q.gam[r - 1]) + g[row * nv + h];
    q.beta[r] = beta[row * nv + h];
  }
  if (q.n == 0) return q;
  for (int64_t r = q.n; r < C; ++r) q.seg[r] = static_cast<int>(C);
  q.carries = !starts(q.t0);
  const int64_t last = q.n - 1;
  for (int64_t r = 0; r < q.n; ++r) {
    q.Gam[r] = q.carries && q.seg[r] == 0 ? std::exp(q.gam[r]) : 0.f;
    q.e[r] = q.seg[r] == q.seg[last] ? std::exp(q.gam[last] - q.gam[r]) : 0.f;
  }
  q.Gam_last = q.Gam[last];
  return q;
}

// The chunk's q̂ (scaled), k̂ [C, dk] and v [C, dv] of v head h, zero past n.
void load_chunk(const real* qkv, const DeltaRuleShape& s, int64_t b, int64_t h, const ChunkGates& q, int64_t C,
                Mat& Q, Mat& K, Mat& V) {
  const int64_t dk = s.k_head_dim, dv = s.v_head_dim, kh = h / (s.n_v_heads / s.n_k_heads);
  Q.assign(C * dk, 0.f);
  K.assign(C * dk, 0.f);
  V.assign(C * dv, 0.f);
  for (int64_t r = 0; r < q.n; ++r) {
    const real* qr = qkv + (b * s.seq + q.t0 + r) * s.row() + kh * dk;
    const real* kr = qr + s.key_dim();
    const real* vr = qkv + (b * s.seq + q.t0 + r) * s.row() + 2 * s.key_dim() + h * dv;
    const real rq = inv_norm(qr, dk) / std::sqrt(static_cast<real>(dk)), rk = inv_norm(kr, dk);
    for (int64_t i = 0; i < dk; ++i) {
      Q[r * dk + i] = qr[i] * rq;
      K[r * dk + i] = kr[i] * rk;
    }
    std::copy(vr, vr + dv, V.begin() + r * dv);
  }
}

// T = (I + A)⁻¹ [C, C], U = T·(β ⊙ V), W = T·(βΓ ⊙ K̂).
void wy(const Mat& K, const Mat& V, const ChunkGates& q, int64_t C, int64_t dk, int64_t dv, Mat& Tm, Mat& U, Mat& W) {
  Mat KK(C * C), A(C * C, 0.f);
  mm(KK.data(), K.data(), K.data(), C, C, dk, false, true, false);
  for (int64_t r = 0; r < C; ++r)
    for (int64_t s = 0; s < r; ++s) A[r * C + s] = q.beta[r] * KK[r * C + s] * q.D(r, s);
  Tm.assign(C * C, 0.f);
  for (int64_t r = 0; r < C; ++r) {
    Tm[r * C + r] = 1.f;
    for (int64_t s = 0; s < r; ++s) {
      real acc = 0.f;
      for (int64_t m = s; m < r; ++m) acc += A[r * C + m] * Tm[m * C + s];
      Tm[r * C + s] = -acc;
    }
  }
  Mat XU(C * dv), XW(C * dk);
  for (int64_t r = 0; r < C; ++r) {
    for (int64_t j = 0; j < dv; ++j) XU[r * dv + j] = q.beta[r] * V[r * dv + j];
    for (int64_t i = 0; i < dk; ++i) XW[r * dk + i] = q.beta[r] * q.Gam[r] * K[r * dk + i];
  }
  U.resize(C * dv);
  W.resize(C * dk);
  mm(U.data(), Tm.data(), XU.data(), C, dv, C, false, false, false);
  mm(W.data(), Tm.data(), XW.data(), C, dk, C, false, false, false);
}

// Q̂K̂ᵀ ⊙ D on s ≤ r (zero elsewhere).
Mat causal_scores(const Mat& Q, const Mat& K, const ChunkGates& q, int64_t C, int64_t dk) {
  Mat P(C * C);
  mm(P.data(), Q.data(), K.data(), C, C, dk, false, true, false);
  for (int64_t r = 0; r < C; ++r)
    for (int64_t s = 0; s < C; ++s) P[r * C + s] = s <= r ? P[r * C + s] * q.D(r, s) : 0.f;
  return P;
}

// Row-scaled copy: out[r, :] = a[r]·X[r, :].
Mat row_scaled(const Mat& X, const std::vector<real>& a, int64_t C, int64_t d) {
  Mat out(X);
  for (int64_t r = 0; r < C; ++r)
    for (int64_t i = 0; i < d; ++i) out[r * d + i] *= a[r];
  return out;
}

// Everything one v head's chunk keeps between the stages.
struct Chunk {
  ChunkGates q;
  Mat Q, K, V, Tm, U, W, Vn, S;  // S: the state entering the chunk
};

// The forward over one sequence's v head: every chunk's values and the output rows.
std::vector<Chunk> forward_head(real* o, const real* qkv, const real* g, const real* beta, const DeltaRuleShape& s,
                                int64_t b, int64_t h, int64_t C) {
  const int64_t dk = s.k_head_dim, dv = s.v_head_dim, L = s.seq_lens ? s.seq_lens[b] : s.seq;
  std::vector<Chunk> chunks(static_cast<size_t>((L + C - 1) / C));
  Mat S(dk * dv, 0.f);
  for (int64_t c = 0; c < static_cast<int64_t>(chunks.size()); ++c) {
    Chunk& k = chunks[c];
    k.q = chunk_gates(g, beta, s, b, h, c, C);
    if (!k.q.carries) std::fill(S.begin(), S.end(), 0.f);  // a segment starts with the chunk
    load_chunk(qkv, s, b, h, k.q, C, k.Q, k.K, k.V);
    wy(k.K, k.V, k.q, C, dk, dv, k.Tm, k.U, k.W);
    k.S = S;
    k.Vn = k.U;
    Mat WS(C * dv);
    mm(WS.data(), k.W.data(), S.data(), C, dv, dk, false, false, false);
    for (int64_t i = 0; i < C * dv; ++i) k.Vn[i] -= WS[i];
    if (o) {
      Mat O(C * dv);
      mm(O.data(), row_scaled(k.Q, k.q.Gam, C, dk).data(), S.data(), C, dv, dk, false, false, false);
      mm(O.data(), causal_scores(k.Q, k.K, k.q, C, dk).data(), k.Vn.data(), C, dv, C, false, false, true);
      for (int64_t r = 0; r < k.q.n; ++r)
        std::copy(O.begin() + r * dv, O.begin() + (r + 1) * dv, o + (b * s.seq + k.q.t0 + r) * s.value_dim() + h * dv);
    }
    for (real& x : S) x *= k.q.Gam_last;
    mm(S.data(), row_scaled(k.K, k.q.e, C, dk).data(), k.Vn.data(), dk, dv, C, true, false, true);
  }
  return chunks;
}

// dx of y = x·r (r = 1/sqrt(Σx² + eps)) given dy, times `scale`.
void l2norm_backward(real* dx, const real* x, const real* dy, int64_t n, real scale) {
  const real r = inv_norm(x, n);
  double xdy = 0.0;
  for (int64_t i = 0; i < n; ++i) xdy += static_cast<double>(x[i]) * dy[i];
  const real c = static_cast<real>(xdy) * r * r * r;
  for (int64_t i = 0; i < n; ++i) dx[i] = scale * (r * dy[i] - x[i] * c);
}

}  // namespace

void gated_delta_rule_chunked_forward(real* o, const real* qkv, const real* g, const real* beta,
                                      const DeltaRuleShape& s, int64_t chunk) {
  MT_ASSERT(chunk > 0 && s.n_k_heads > 0 && s.n_v_heads % s.n_k_heads == 0);
  zero(o, s.batch * s.seq * s.value_dim());
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.n_v_heads; ++h) forward_head(o, qkv, g, beta, s, b, h, chunk);
}

void gated_delta_rule_chunked_backward(real* d_qkv, real* dg, real* dbeta, const real* d_o, const real* qkv,
                                       const real* g, const real* beta, const DeltaRuleShape& s, int64_t chunk) {
  MT_ASSERT(chunk > 0 && s.n_k_heads > 0 && s.n_v_heads % s.n_k_heads == 0);
  const int64_t C = chunk, dk = s.k_head_dim, dv = s.v_head_dim, nv = s.n_v_heads, R = s.row(), T = s.batch * s.seq;
  zero(d_qkv, T * R);
  zero(dg, T * nv);
  zero(dbeta, T * nv);
  std::vector<real> dq_part(T * nv * dk, 0.f), dk_part(T * nv * dk, 0.f);  // per token and v head
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < nv; ++h) {
      std::vector<Chunk> chunks = forward_head(nullptr, qkv, g, beta, s, b, h, C);
      const int64_t n_chunks = static_cast<int64_t>(chunks.size());
      // The state gradient, last chunk first: dSn[c] is the gradient of the state leaving chunk c; dVn[c] of V'.
      std::vector<Mat> dSn(n_chunks), dVn(n_chunks), dO(n_chunks);
      Mat dS(dk * dv, 0.f);
      for (int64_t c = n_chunks - 1; c >= 0; --c) {
        const Chunk& k = chunks[c];
        dO[c].assign(C * dv, 0.f);
        for (int64_t r = 0; r < k.q.n; ++r) {
          const real* src = d_o + (b * s.seq + k.q.t0 + r) * s.value_dim() + h * dv;
          std::copy(src, src + dv, dO[c].begin() + r * dv);
        }
        dSn[c] = dS;
        dVn[c].assign(C * dv, 0.f);
        mm(dVn[c].data(), causal_scores(k.Q, k.K, k.q, C, dk).data(), dO[c].data(), C, dv, C, true, false, false);
        mm(dVn[c].data(), row_scaled(k.K, k.q.e, C, dk).data(), dS.data(), C, dv, dk, false, false, true);
        for (real& x : dS) x *= k.q.Gam_last;
        mm(dS.data(), row_scaled(k.Q, k.q.Gam, C, dk).data(), dO[c].data(), dk, dv, C, true, false, true);
        Mat Wn(k.W);
        for (real& x : Wn) x = -x;
        mm(dS.data(), Wn.data(), dVn[c].data(), dk, dv, C, true, false, true);
        if (!k.q.carries) std::fill(dS.begin(), dS.end(), 0.f);
      }
      for (int64_t c = 0; c < n_chunks; ++c) {
        const Chunk& k = chunks[c];
        const ChunkGates& q = k.q;
        std::vector<real> dgam(C, 0.f), db(C, 0.f);
        // dq̂, dk̂ through the output and the state; dW.
        Mat dP(C * C), QK(C * C), KK(C * C), Pt(C * C, 0.f);
        mm(dP.data(), dO[c].data(), k.Vn.data(), C, C, dv, false, true, false);
        mm(QK.data(), k.Q.data(), k.K.data(), C, C, dk, false, true, false);
        for (int64_t r = 0; r < C; ++r)
          for (int64_t t = 0; t <= r; ++t) {
            const real d = q.D(r, t), z = dP[r * C + t] * QK[r * C + t] * d;
            Pt[r * C + t] = dP[r * C + t] * d;
            if (t == r) continue;  // D[r, r] = 1 has no gate gradient: adding z and taking it back would round
            dgam[r] += z;
            dgam[t] -= z;
          }
        Mat dQ(C * dk), dK(C * dk), dW(C * dk);
        mm(dQ.data(), row_scaled(dO[c], q.Gam, C, dv).data(), k.S.data(), C, dk, dv, false, true, false);
        for (int64_t r = 0; r < C; ++r) dgam[r] += dot(&k.Q[r * dk], &dQ[r * dk], dk);
        mm(dQ.data(), Pt.data(), k.K.data(), C, dk, C, false, false, true);
        mm(dW.data(), dVn[c].data(), k.S.data(), C, dk, dv, false, true, false);
        for (real& x : dW) x = -x;
        mm(dK.data(), k.Vn.data(), dSn[c].data(), C, dk, dv, false, true, false);
        double y_sum = 0.0;
        for (int64_t r = 0; r < C; ++r) {
          const real y = q.e[r] * dot(&k.K[r * dk], &dK[r * dk], dk);
          dgam[r] -= y;
          y_sum += y;
        }
        dK = row_scaled(dK, q.e, C, dk);
        mm(dK.data(), Pt.data(), k.Q.data(), C, dk, C, true, false, true);
        if (q.n > 0) {
          double hs = 0.0;
          for (int64_t i = 0; i < dk * dv; ++i) hs += static_cast<double>(dSn[c][i]) * k.S[i];
          dgam[q.n - 1] += static_cast<real>(y_sum) + q.Gam_last * static_cast<real>(hs);
        }
        // Through the WY representation: dX_U = Tᵀ·dV', dX_W = Tᵀ·dW, dA = −(dX_U·Uᵀ + dX_W·Wᵀ).
        Mat dXU(C * dv), dXW(C * dk), dA(C * C), E(C * C, 0.f);
        mm(dXU.data(), k.Tm.data(), dVn[c].data(), C, dv, C, true, false, false);
        mm(dXW.data(), k.Tm.data(), dW.data(), C, dk, C, true, false, false);
        for (int64_t r = 0; r < C; ++r) {
          db[r] += dot(&dXU[r * dv], &k.V[r * dv], dv);
          const real xk = dot(&dXW[r * dk], &k.K[r * dk], dk);
          db[r] += q.Gam[r] * xk;
          dgam[r] += q.beta[r] * q.Gam[r] * xk;
        }
        mm(dA.data(), dXU.data(), k.U.data(), C, C, dv, false, true, false);
        mm(dA.data(), dXW.data(), k.W.data(), C, C, dk, false, true, true);
        mm(KK.data(), k.K.data(), k.K.data(), C, C, dk, false, true, false);
        for (int64_t r = 0; r < C; ++r)
          for (int64_t t = 0; t < r; ++t) {
            const real d = q.D(r, t), da = -dA[r * C + t], z = da * q.beta[r] * KK[r * C + t] * d;
            db[r] += da * KK[r * C + t] * d;
            E[r * C + t] = da * q.beta[r] * d;
            dgam[r] += z;
            dgam[t] -= z;
          }
        for (int64_t r = 0; r < C; ++r)
          for (int64_t i = 0; i < dk; ++i) dK[r * dk + i] += q.beta[r] * q.Gam[r] * dXW[r * dk + i];
        mm(dK.data(), E.data(), k.K.data(), C, dk, C, false, false, true);
        mm(dK.data(), E.data(), k.K.data(), C, dk, C, true, false, true);
        // Write the chunk's rows: dv, dβ, dg (γ's gradient summed to the segment's end), the dq̂, dk̂ parts.
        real run = 0.f;
        for (int64_t r = q.n - 1; r >= 0; --r) {
          run = (r == q.n - 1 || q.seg[r + 1] != q.seg[r] ? 0.f : run) + dgam[r];
          const int64_t row = b * s.seq + q.t0 + r;
          dg[row * nv + h] = run;
          dbeta[row * nv + h] = db[r];
          for (int64_t j = 0; j < dv; ++j) d_qkv[row * R + 2 * s.key_dim() + h * dv + j] = q.beta[r] * dXU[r * dv + j];
          std::copy(&dQ[r * dk], &dQ[(r + 1) * dk], &dq_part[(row * nv + h) * dk]);
          std::copy(&dK[r * dk], &dK[(r + 1) * dk], &dk_part[(row * nv + h) * dk]);
        }
      }
    }
  // dq, dk of the raw q, k: each k head's v heads summed in head order, then the normalisations' backward.
  const int64_t group = nv / s.n_k_heads;
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < T; ++row) {
    std::vector<real> dqh(dk), dkh(dk);
    for (int64_t kh = 0; kh < s.n_k_heads; ++kh) {
      std::fill(dqh.begin(), dqh.end(), 0.f);
      std::fill(dkh.begin(), dkh.end(), 0.f);
      for (int64_t h = kh * group; h < (kh + 1) * group; ++h) {
        axpy(dqh.data(), 1.f, &dq_part[(row * nv + h) * dk], dk);
        axpy(dkh.data(), 1.f, &dk_part[(row * nv + h) * dk], dk);
      }
      const real* q = qkv + row * R + kh * dk;
      l2norm_backward(d_qkv + row * R + kh * dk, q, dqh.data(), dk, 1.f / std::sqrt(static_cast<real>(dk)));
      l2norm_backward(d_qkv + row * R + s.key_dim() + kh * dk, q + s.key_dim(), dkh.data(), dk, 1.f);
    }
  }
}

}  // namespace mt::cpu
