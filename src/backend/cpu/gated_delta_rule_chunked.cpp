// The gated delta rule in chunked form (the WY / UT-transform representation flash-linear-attention's chunk
// kernels use, in the order transformers' torch_chunk_gated_delta_rule computes it), the algorithm
// kernels/gated_delta_rule.cu implements. Within a chunk of c tokens (γ = cumulative log decay from the chunk start,
// A[r, s] = β_r·(k̂_r·k̂_s)·exp(γ_r − γ_s) for s < r, T = (I + A)⁻¹ by forward substitution):
//   U = T·(β ⊙ V), W = T·(β·exp(γ) ⊙ K), V' = U − W·S,
//   O = (exp(γ) ⊙ Q̂)·S + (Q̂K̂ᵀ ⊙ exp(γ_r − γ_s), s ≤ r)·V', S ← exp(γ_c)·S + (exp(γ_c − γ) ⊙ K̂)ᵀ·V'.
// Invariant: the same results as the recurrent form (gated_delta_rule.cpp) up to rounding: chunks start at every
// sequence and segment start, the state at zero; padded tokens give o = 0.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"

namespace mt::cpu {

namespace {

float inv_norm(const float* x, int64_t n) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  return 1.f / std::sqrt(static_cast<float>(ss) + 1e-6f);
}

}  // namespace

void gated_delta_rule_chunked_forward(float* o, const float* qkv, const float* g, const float* beta,
                                      const DeltaRuleShape& s, int64_t chunk) {
  MT_ASSERT(chunk > 0 && s.n_k_heads > 0 && s.n_v_heads % s.n_k_heads == 0);
  const int64_t dk = s.k_head_dim, dv = s.v_head_dim, nv = s.n_v_heads, vd = s.value_dim(), R = s.row();
  const int64_t group = nv / s.n_k_heads;
  zero(o, s.batch * s.seq * vd);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < nv; ++h) {
      const int64_t L = s.seq_lens ? s.seq_lens[b] : s.seq, kh = h / group;
      const auto row = [&](int64_t t) { return b * s.seq + t; };
      std::vector<float> S(static_cast<size_t>(dk * dv));
      std::vector<float> Q, K, V, gam, bet, A, U, W, Vn;
      for (int64_t c0 = 0; c0 < L;) {
        // The chunk: up to `chunk` tokens, ending before the next segment start; the state restarts at a segment.
        if (c0 == 0 || (s.segments && s.segments[row(c0)] != s.segments[row(c0) - 1])) std::fill(S.begin(), S.end(), 0.f);
        int64_t c = 1;
        while (c < chunk && c0 + c < L && !(s.segments && s.segments[row(c0 + c)] != s.segments[row(c0 + c) - 1])) ++c;
        Q.assign(static_cast<size_t>(c * dk), 0.f);
        K.assign(static_cast<size_t>(c * dk), 0.f);
        V.assign(static_cast<size_t>(c * dv), 0.f);
        gam.assign(static_cast<size_t>(c), 0.f);
        bet.assign(static_cast<size_t>(c), 0.f);
        float acc = 0.f;
        for (int64_t r = 0; r < c; ++r) {
          const float* q = qkv + row(c0 + r) * R + kh * dk;
          const float* k = q + s.key_dim();
          const float* v = qkv + row(c0 + r) * R + 2 * s.key_dim() + h * dv;
          const float rq = inv_norm(q, dk) / std::sqrt(static_cast<float>(dk)), rk = inv_norm(k, dk);
          for (int64_t i = 0; i < dk; ++i) {
            Q[static_cast<size_t>(r * dk + i)] = q[i] * rq;
            K[static_cast<size_t>(r * dk + i)] = k[i] * rk;
          }
          std::copy(v, v + dv, V.begin() + r * dv);
          acc += g[row(c0 + r) * nv + h];
          gam[static_cast<size_t>(r)] = acc;
          bet[static_cast<size_t>(r)] = beta[row(c0 + r) * nv + h];
        }
        // A (strictly lower), then U = T·(β ⊙ V) and W = T·(β·exp(γ) ⊙ K) by forward substitution.
        A.assign(static_cast<size_t>(c * c), 0.f);
        for (int64_t r = 0; r < c; ++r)
          for (int64_t q = 0; q < r; ++q)
            A[static_cast<size_t>(r * c + q)] = bet[static_cast<size_t>(r)] *
                                                dot(&K[static_cast<size_t>(r * dk)], &K[static_cast<size_t>(q * dk)], dk) *
                                                std::exp(gam[static_cast<size_t>(r)] - gam[static_cast<size_t>(q)]);
        U.assign(static_cast<size_t>(c * dv), 0.f);
        W.assign(static_cast<size_t>(c * dk), 0.f);
        for (int64_t r = 0; r < c; ++r) {
          const float br = bet[static_cast<size_t>(r)], er = std::exp(gam[static_cast<size_t>(r)]);
          for (int64_t j = 0; j < dv; ++j) U[static_cast<size_t>(r * dv + j)] = br * V[static_cast<size_t>(r * dv + j)];
          for (int64_t i = 0; i < dk; ++i) W[static_cast<size_t>(r * dk + i)] = br * er * K[static_cast<size_t>(r * dk + i)];
          for (int64_t q = 0; q < r; ++q) {
            const float a = A[static_cast<size_t>(r * c + q)];
            axpy(&U[static_cast<size_t>(r * dv)], -a, &U[static_cast<size_t>(q * dv)], dv);
            axpy(&W[static_cast<size_t>(r * dk)], -a, &W[static_cast<size_t>(q * dk)], dk);
          }
        }
        // V' = U − W·S
        Vn = U;
        for (int64_t r = 0; r < c; ++r)
          for (int64_t i = 0; i < dk; ++i)
            axpy(&Vn[static_cast<size_t>(r * dv)], -W[static_cast<size_t>(r * dk + i)], &S[static_cast<size_t>(i * dv)], dv);
        // O = (exp(γ) ⊙ Q̂)·S + (Q̂K̂ᵀ ⊙ decay, causal)·V'
        for (int64_t r = 0; r < c; ++r) {
          float* out = o + row(c0 + r) * vd + h * dv;
          const float er = std::exp(gam[static_cast<size_t>(r)]);
          for (int64_t i = 0; i < dk; ++i) axpy(out, er * Q[static_cast<size_t>(r * dk + i)], &S[static_cast<size_t>(i * dv)], dv);
          for (int64_t q = 0; q <= r; ++q) {
            const float a = dot(&Q[static_cast<size_t>(r * dk)], &K[static_cast<size_t>(q * dk)], dk) *
                            std::exp(gam[static_cast<size_t>(r)] - gam[static_cast<size_t>(q)]);
            axpy(out, a, &Vn[static_cast<size_t>(q * dv)], dv);
          }
        }
        // S ← exp(γ_c)·S + (exp(γ_c − γ) ⊙ K̂)ᵀ·V'
        const float last = gam[static_cast<size_t>(c - 1)];
        for (float& x : S) x *= std::exp(last);
        for (int64_t r = 0; r < c; ++r) {
          const float w = std::exp(last - gam[static_cast<size_t>(r)]);
          for (int64_t i = 0; i < dk; ++i)
            axpy(&S[static_cast<size_t>(i * dv)], w * K[static_cast<size_t>(r * dk + i)], &Vn[static_cast<size_t>(r * dv)], dv);
        }
        c0 += c;
      }
    }
}

}  // namespace mt::cpu
