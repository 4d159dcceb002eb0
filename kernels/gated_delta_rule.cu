// The gated delta rule on the GPU in its recurrent form, state fp32 in shared memory: one block per (sequence,
// v head), thread j owning column j of S [k_head_dim, v_head_dim] (q, k L2-normalised and q scaled in fp32, as the
// CPU reference). Backward: a forward pass keeps S at every 64-token chunk start, then each chunk, last first,
// recomputes its states and runs the recurrence in reverse with dS in shared memory; dq, dk land per v head and are
// summed over each k head's v heads in head order. Invariant: the CPU reference's semantics (state zero at every
// sequence and segment start, o = 0 and no gradient on padding); every sum has a fixed order (deterministic).
#include <algorithm>

#include "kernels/device_util.cuh"
#include "kernels/kernels.h"
#include "kernels/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int threads = 128;                  // a multiple of 32: block_sum reduces warp by warp
constexpr int red_floats = 3 * threads / 32;  // block_sum's scratch
constexpr int64_t chunk = 64;
constexpr int max_head_dim = 256;

struct Geometry {
  int64_t seq, dk, dv, nk, nv, row;  // row: elements per token of qkv
  const int32_t* seq_lens;
  const int32_t* segments;
  __device__ int64_t length(int64_t b) const { return seq_lens ? seq_lens[b] : seq; }
  __device__ bool segment_start(int64_t b, int64_t t) const {
    return t == 0 || (segments && segments[b * seq + t] != segments[b * seq + t - 1]);
  }
  __device__ int64_t k_head(int64_t h) const { return h / (nv / nk); }
};

// v[n] ← its sum over the block, the same on every thread: warp sums, then the warps' sums in warp order
// (deterministic). Every thread of the block calls it; red holds red_floats floats.
template <int N>
__device__ void block_sum(float (&v)[N], float* red) {
  static_assert(N <= 3);
  const int warp = threadIdx.x / 32, warps = blockDim.x / 32;
#pragma unroll
  for (int n = 0; n < N; ++n) v[n] = warp_sum(v[n]);
  if (threadIdx.x % 32 == 0)
    for (int n = 0; n < N; ++n) red[n * warps + warp] = v[n];
  __syncthreads();
#pragma unroll
  for (int n = 0; n < N; ++n) {
    v[n] = 0.f;
    for (int w = 0; w < warps; ++w) v[n] += red[n * warps + w];
  }
  __syncthreads();  // red is free again
}

// Loads token t's q, k of k head kh into shared qh, kh (normalised, q scaled) and its v slice into vs; returns Σq²
// and Σk² of the raw q, k (for the backward of the normalisation) after a barrier.
template <typename T>
__device__ float2 load_token(const T* qkv, const Geometry& G, int64_t row_index, int64_t h, float* qh, float* kh,
                             float* vs, float* red) {
  const T* q = qkv + row_index * G.row + G.k_head(h) * G.dk;
  const T* k = q + G.nk * G.dk;
  const T* v = qkv + row_index * G.row + 2 * G.nk * G.dk + h * G.dv;
  float sums[2] = {0.f, 0.f};
  for (int64_t i = threadIdx.x; i < G.dk; i += blockDim.x) {
    const float qv = to_f32(q[i]), kv = to_f32(k[i]);
    qh[i] = qv;
    kh[i] = kv;
    sums[0] += qv * qv;
    sums[1] += kv * kv;
  }
  for (int64_t j = threadIdx.x; j < G.dv; j += blockDim.x) vs[j] = to_f32(v[j]);
  block_sum(sums, red);
  const float rq = rsqrtf(sums[0] + 1e-6f) * rsqrtf(static_cast<float>(G.dk)), rk = rsqrtf(sums[1] + 1e-6f);
  for (int64_t i = threadIdx.x; i < G.dk; i += blockDim.x) {
    qh[i] *= rq;
    kh[i] *= rk;
  }
  __syncthreads();
  return {sums[0], sums[1]};
}

// One recurrence step on the shared state S [dk, columns ≥ dv] of row stride `stride`: S ← decay·S + k̂·δᵀ with
// δ = β(v − decay·Sᵀk̂), thread j updating column j; states, when given, receives S [dk, dv] after the step.
// Ends with a barrier.
__device__ void step(float* S, int64_t stride, const Geometry& G, const float* kh, const float* vs, float decay,
                     float beta, float* states) {
  for (int64_t j = threadIdx.x; j < G.dv; j += blockDim.x) {
    float u = 0.f;
    for (int64_t i = 0; i < G.dk; ++i) u += S[i * stride + j] * kh[i];
    u *= decay;
    const float d = beta * (vs[j] - u);
    for (int64_t i = 0; i < G.dk; ++i) {
      S[i * stride + j] = decay * S[i * stride + j] + kh[i] * d;
      if (states) states[i * G.dv + j] = S[i * stride + j];
    }
  }
  __syncthreads();
}

template <typename T>
__global__ void forward_kernel(T* o, const T* qkv, const float* g, const float* beta, Geometry G) {
  extern __shared__ float smem[];
  float* S = smem;                       // [dk, dv]
  float* qh = S + G.dk * G.dv;           // [dk]
  float* kh = qh + G.dk;                 // [dk]
  float* vs = kh + G.dk;                 // [dv]
  float* red = vs + G.dv;                // [red_floats]
  const int64_t b = blockIdx.x / G.nv, h = blockIdx.x % G.nv, L = G.length(b);
  for (int64_t t = 0; t < G.seq; ++t) {
    const int64_t r = b * G.seq + t;
    T* out = o + r * G.nv * G.dv + h * G.dv;
    if (t >= L) {
      for (int64_t j = threadIdx.x; j < G.dv; j += blockDim.x) out[j] = from_f32<T>(0.f);
      continue;
    }
    if (G.segment_start(b, t))
      for (int64_t e = threadIdx.x; e < G.dk * G.dv; e += blockDim.x) S[e] = 0.f;
    load_token(qkv, G, r, h, qh, kh, vs, red);
    step(S, G.dv, G, kh, vs, expf(g[r * G.nv + h]), beta[r * G.nv + h], nullptr);
    for (int64_t j = threadIdx.x; j < G.dv; j += blockDim.x) {
      float acc = 0.f;
      for (int64_t i = 0; i < G.dk; ++i) acc += S[i * G.dv + j] * qh[i];
      out[j] = from_f32<T>(acc);
    }
    __syncthreads();
  }
}

// Backward of one (sequence, v head). ckpt: [chunks, dk, dv] S before each chunk; states: [chunk, dk, dv] S after
// each token of the chunk being reversed; dq_part, dk_part: [T, nv, dk] per-v-head gradients of the raw q, k.
template <typename T>
__global__ void backward_kernel(T* d_qkv, float* dq_part, float* dk_part, float* dg, float* dbeta, const T* d_o,
                                const T* qkv, const float* g, const float* beta, float* ckpt_all, float* states_all,
                                Geometry G) {
  extern __shared__ float smem[];
  const int64_t P = G.dv + 1;             // padded row stride of dS and S'
  float* dS = smem;                       // [dk, P]
  float* Sp = dS + G.dk * P;              // [dk, P]: S' = decay·S_{t−1}; also the working state of recomputes
  float* qh = Sp + G.dk * P;
  float* kh = qh + G.dk;
  float* vs = kh + G.dk;                  // [dv]
  float* dos = vs + G.dv;                 // [dv] d_o of the token
  float* delta = dos + G.dv;              // [dv]
  float* vmu = delta + G.dv;              // [dv] v − u
  float* du = vmu + G.dv;                 // [dv]
  float* dqh = du + G.dv;                 // [dk]
  float* dkh = dqh + G.dk;                // [dk]
  float* red = dkh + G.dk;                // [red_floats]
  const int64_t b = blockIdx.x / G.nv, h = blockIdx.x % G.nv, L = G.length(b);
  const int64_t chunks = (L + chunk - 1) / chunk, DD = G.dk * G.dv;
  float* ckpt = ckpt_all + static_cast<int64_t>(blockIdx.x) * ((G.seq + chunk - 1) / chunk) * DD;
  float* states = states_all + static_cast<int64_t>(blockIdx.x) * chunk * DD;

  // Forward: S at every chunk start (Sp as the working state, row stride P).
  for (int64_t e = threadIdx.x; e < G.dk * P; e += blockDim.x) Sp[e] = 0.f;
  __syncthreads();
  for (int64_t t = 0; t < L; ++t) {
    const int64_t r = b * G.seq + t;
    if (G.segment_start(b, t)) {
      for (int64_t e = threadIdx.x; e < G.dk * P; e += blockDim.x) Sp[e] = 0.f;
      __syncthreads();
    }
    if (t % chunk == 0) {
      for (int64_t e = threadIdx.x; e < DD; e += blockDim.x) ckpt[t / chunk * DD + e] = Sp[e / G.dv * P + e % G.dv];
    }
    load_token(qkv, G, r, h, qh, kh, vs, red);
    step(Sp, P, G, kh, vs, expf(g[r * G.nv + h]), beta[r * G.nv + h], nullptr);
  }

  for (int64_t e = threadIdx.x; e < G.dk * P; e += blockDim.x) dS[e] = 0.f;
  __syncthreads();
  for (int64_t c = chunks - 1; c >= 0; --c) {
    const int64_t t0 = c * chunk, t1 = L < t0 + chunk ? L : t0 + chunk;
    // Recompute the chunk's states from its checkpoint into `states` (Sp as the working state).
    for (int64_t e = threadIdx.x; e < DD; e += blockDim.x) Sp[e / G.dv * P + e % G.dv] = ckpt[c * DD + e];
    __syncthreads();
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r = b * G.seq + t;
      if (G.segment_start(b, t)) {
        for (int64_t e = threadIdx.x; e < G.dk * P; e += blockDim.x) Sp[e] = 0.f;
        __syncthreads();
      }
      load_token(qkv, G, r, h, qh, kh, vs, red);
      step(Sp, P, G, kh, vs, expf(g[r * G.nv + h]), beta[r * G.nv + h], states + (t - t0) * DD);
    }
    // Reverse over the chunk.
    for (int64_t t = t1 - 1; t >= t0; --t) {
      const int64_t r = b * G.seq + t;
      const float decay = expf(g[r * G.nv + h]), bt = beta[r * G.nv + h];
      const bool start = G.segment_start(b, t);
      const float2 sums = load_token(qkv, G, r, h, qh, kh, vs, red);
      const float sq = sums.x, sk = sums.y;
      for (int64_t j = threadIdx.x; j < G.dv; j += blockDim.x) dos[j] = to_f32(d_o[r * G.nv * G.dv + h * G.dv + j]);
      // S' = decay·S_{t−1}; u, δ.
      const float* prev = t > t0 ? states + (t - 1 - t0) * DD : ckpt + c * DD;
      for (int64_t j = threadIdx.x; j < G.dv; j += blockDim.x) {
        float u = 0.f;
        for (int64_t i = 0; i < G.dk; ++i) {
          const float s = start ? 0.f : decay * prev[i * G.dv + j];
          Sp[i * P + j] = s;
          u += s * kh[i];
        }
        delta[j] = bt * (vs[j] - u);
        vmu[j] = vs[j] - u;
      }
      __syncthreads();
      // dS += q̂·doᵀ; dδ = dSᵀk̂; dv, du, dβ = Σ dδ·(v − u).
      float dbeta_sum[1] = {0.f};
      for (int64_t j = threadIdx.x; j < G.dv; j += blockDim.x) {
        float dd = 0.f;
        for (int64_t i = 0; i < G.dk; ++i) {
          dS[i * P + j] += qh[i] * dos[j];
          dd += dS[i * P + j] * kh[i];
        }
        d_qkv[r * G.row + 2 * G.nk * G.dk + h * G.dv + j] = from_f32<T>(bt * dd);
        du[j] = -bt * dd;
        dbeta_sum[0] += dd * vmu[j];
      }
      block_sum(dbeta_sum, red);  // its barriers also publish du
      if (threadIdx.x == 0) dbeta[r * G.nv + h] = dbeta_sum[0];
      // Rows: dq̂ = S_t·do, dk̂ = dS·δ + S'·du; dS' = dS + k̂·duᵀ; dg = Σ dS'⊙S'; dS_{t−1} = decay·dS'.
      const float* St = states + (t - t0) * DD;
      const T* q = qkv + r * G.row + G.k_head(h) * G.dk;
      const T* k = q + G.nk * G.dk;
      float row_sums[3] = {0.f, 0.f, 0.f};  // dg; q·dq̂ and k·dk̂ (the normalisations' backward)
      for (int64_t i = threadIdx.x; i < G.dk; i += blockDim.x) {
        float a = 0.f, k2 = 0.f, gsum = 0.f;
        for (int64_t j = 0; j < G.dv; ++j) {
          a += St[i * G.dv + j] * dos[j];
          k2 += dS[i * P + j] * delta[j] + Sp[i * P + j] * du[j];
          const float ds = dS[i * P + j] + kh[i] * du[j];
          gsum += ds * Sp[i * P + j];
          dS[i * P + j] = start ? 0.f : decay * ds;
        }
        dqh[i] = a;
        dkh[i] = k2;
        row_sums[0] += gsum;
        row_sums[1] += to_f32(q[i]) * a;
        row_sums[2] += to_f32(k[i]) * k2;
      }
      block_sum(row_sums, red);
      if (threadIdx.x == 0) dg[r * G.nv + h] = row_sums[0];
      const float rq = rsqrtf(sq + 1e-6f), rk = rsqrtf(sk + 1e-6f), scale = rsqrtf(static_cast<float>(G.dk));
      for (int64_t i = threadIdx.x; i < G.dk; i += blockDim.x) {
        dq_part[(r * G.nv + h) * G.dk + i] = scale * (rq * dqh[i] - to_f32(q[i]) * rq * rq * rq * row_sums[1]);
        dk_part[(r * G.nv + h) * G.dk + i] = rk * dkh[i] - to_f32(k[i]) * rk * rk * rk * row_sums[2];
      }
      __syncthreads();
    }
  }
}

// d_qkv's q and k columns: the sum over each k head's v heads, in head order (zero on padding: the parts are zero).
template <typename T>
__global__ void sum_parts_kernel(T* d_qkv, const float* dq_part, const float* dk_part, int64_t T_, Geometry G) {
  const int64_t n = T_ * G.nk * G.dk, group = G.nv / G.nk;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
    const int64_t r = e / (G.nk * G.dk), kh = e / G.dk % G.nk, i = e % G.dk;
    float aq = 0.f, ak = 0.f;
    for (int64_t h = kh * group; h < (kh + 1) * group; ++h) {
      aq += dq_part[(r * G.nv + h) * G.dk + i];
      ak += dk_part[(r * G.nv + h) * G.dk + i];
    }
    d_qkv[r * G.row + kh * G.dk + i] = from_f32<T>(aq);
    d_qkv[r * G.row + G.nk * G.dk + kh * G.dk + i] = from_f32<T>(ak);
  }
}

Geometry geometry(const DeltaRuleShape& s) {
  return {s.seq, s.k_head_dim, s.v_head_dim, s.n_k_heads, s.n_v_heads, s.row(), s.seq_lens, s.segments};
}

void check_shape(const char* op, const DeltaRuleShape& s) {
  MT_ASSERT(s.batch >= 0 && s.seq > 0 && s.n_k_heads > 0 && s.n_v_heads % s.n_k_heads == 0 && s.k_head_dim > 0 &&
                s.k_head_dim <= max_head_dim && s.v_head_dim > 0 && s.v_head_dim <= max_head_dim,
            "{}: batch={} seq={} k heads {} v heads {} head dims {}/{}", op, s.batch, s.seq, s.n_k_heads,
            s.n_v_heads, s.k_head_dim, s.v_head_dim);
}

}  // namespace

template <typename T>
void gated_delta_rule_forward(T* o, const T* qkv, const float* g, const float* beta, const DeltaRuleShape& shape,
                              cudaStream_t s) {
  check_shape("gated_delta_rule_forward", shape);
  if (shape.batch == 0) return;
  const Geometry G = geometry(shape);
  const size_t smem = static_cast<size_t>(G.dk * G.dv + 2 * G.dk + G.dv + red_floats) * sizeof(float);
  MT_CUDA_CHECK("gated_delta_rule_forward",
                cudaFuncSetAttribute(forward_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(smem)));
  forward_kernel<T><<<static_cast<unsigned>(shape.batch * G.nv), threads, smem, s>>>(o, qkv, g, beta, G);
  MT_CHECK_LAUNCH("gated_delta_rule_forward", "batch={} seq={} heads {}/{} dims {}/{}", shape.batch, shape.seq, G.nk,
                  G.nv, G.dk, G.dv);
}

template <typename T>
void gated_delta_rule_backward(T* d_qkv, float* dg, float* dbeta, const T* d_o, const T* qkv, const float* g,
                               const float* beta, const DeltaRuleShape& shape, cudaStream_t s) {
  check_shape("gated_delta_rule_backward", shape);
  if (shape.batch == 0) return;
  const Geometry G = geometry(shape);
  const int64_t T_ = shape.batch * shape.seq, blocks = shape.batch * G.nv, DD = G.dk * G.dv;
  MT_CUDA_CHECK("gated_delta_rule_backward", cudaMemsetAsync(d_qkv, 0, T_ * G.row * sizeof(T), s));
  MT_CUDA_CHECK("gated_delta_rule_backward", cudaMemsetAsync(dg, 0, T_ * G.nv * sizeof(float), s));
  MT_CUDA_CHECK("gated_delta_rule_backward", cudaMemsetAsync(dbeta, 0, T_ * G.nv * sizeof(float), s));
  const Scratch<float> dq_part("gated_delta_rule_backward", T_ * G.nv * G.dk, s);
  const Scratch<float> dk_part("gated_delta_rule_backward", T_ * G.nv * G.dk, s);
  MT_CUDA_CHECK("gated_delta_rule_backward",
                cudaMemsetAsync(dq_part.get(), 0, T_ * G.nv * G.dk * sizeof(float), s));
  MT_CUDA_CHECK("gated_delta_rule_backward",
                cudaMemsetAsync(dk_part.get(), 0, T_ * G.nv * G.dk * sizeof(float), s));
  const Scratch<float> ckpt("gated_delta_rule_backward", blocks * ((shape.seq + chunk - 1) / chunk) * DD, s);
  const Scratch<float> states("gated_delta_rule_backward", blocks * chunk * DD, s);
  const int64_t P = G.dv + 1;
  const size_t smem =
      static_cast<size_t>(2 * G.dk * P + 4 * G.dk + 5 * G.dv + red_floats) * sizeof(float);
  MT_CUDA_CHECK("gated_delta_rule_backward",
                cudaFuncSetAttribute(backward_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(smem)));
  backward_kernel<T><<<static_cast<unsigned>(blocks), threads, smem, s>>>(
      d_qkv, dq_part.get(), dk_part.get(), dg, dbeta, d_o, qkv, g, beta, ckpt.get(), states.get(), G);
  sum_parts_kernel<T><<<grid_for(T_ * G.nk * G.dk, 256), 256, 0, s>>>(d_qkv, dq_part.get(), dk_part.get(), T_, G);
  MT_CHECK_LAUNCH("gated_delta_rule_backward", "batch={} seq={} heads {}/{} dims {}/{}", shape.batch, shape.seq, G.nk,
                  G.nv, G.dk, G.dv);
}

template void gated_delta_rule_forward<float>(float*, const float*, const float*, const float*, const DeltaRuleShape&,
                                              cudaStream_t);
template void gated_delta_rule_forward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const float*,
                                                      const float*, const DeltaRuleShape&, cudaStream_t);
template void gated_delta_rule_backward<float>(float*, float*, float*, const float*, const float*, const float*,
                                               const float*, const DeltaRuleShape&, cudaStream_t);
template void gated_delta_rule_backward<__nv_bfloat16>(__nv_bfloat16*, float*, float*, const __nv_bfloat16*,
                                                       const __nv_bfloat16*, const float*, const float*,
                                                       const DeltaRuleShape&, cudaStream_t);

}  // namespace mt::cuda
