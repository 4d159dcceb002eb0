// The gated delta rule on the GPU in its recurrent form, state fp32 in shared memory. The columns of the state S
// [k_head_dim, v_head_dim] evolve independently, so one block (one warp) runs one (sequence, v head, tile of 32
// columns), thread j owning column j of the tile (q, k L2-normalised and q scaled in fp32, as the CPU reference).
// Backward: a forward pass keeps the tile's S at every 64-token chunk start, then each chunk, last first, recomputes
// its states and runs the recurrence in reverse with dS in shared memory; dq, dk, dg and dbeta land per (v head,
// tile) and are summed over each k head's v heads and the tiles in order. Invariant: the CPU reference's semantics (state zero at every
// sequence and segment start, o = 0 and no gradient on padding); every sum has a fixed order (deterministic).
#include <algorithm>

#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int cols = 32;                      // state columns per block, one per thread
constexpr int threads = cols;                 // a multiple of 32: block_sum reduces warp by warp
constexpr int red_floats = 3 * threads / 32;  // block_sum's scratch
constexpr int64_t chunk = 64;
constexpr int max_head_dim = 256;

struct Geometry {
  int64_t seq, dk, dv, nk, nv, row;  // row: elements per token of qkv
  const int32_t* seq_lens;
  const int32_t* segments;
  __host__ __device__ int64_t tiles() const { return (dv + cols - 1) / cols; }
  __device__ int64_t length(int64_t b) const { return seq_lens ? seq_lens[b] : seq; }
  __device__ bool segment_start(int64_t b, int64_t t) const {
    return t == 0 || (segments && segments[b * seq + t] != segments[b * seq + t - 1]);
  }
  __device__ int64_t k_head(int64_t h) const { return h / (nv / nk); }
};

// This block's (sequence, v head, tile) and the tile's first column and width.
struct Tile {
  int64_t b, h, tile, c0, nc;
  __device__ explicit Tile(const Geometry& G) {
    const int64_t tiles = G.tiles();
    tile = blockIdx.x % tiles;
    h = blockIdx.x / tiles % G.nv;
    b = blockIdx.x / tiles / G.nv;
    c0 = tile * cols;
    nc = G.dv - c0 < cols ? G.dv - c0 : cols;
  }
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

// Loads token row r's q, k of v head h's k head into shared qh, kh (normalised, q scaled) and the tile's v columns
// into vs; returns Σq² and Σk² of the raw q, k (for the backward of the normalisation) after a barrier.
template <typename T>
__device__ float2 load_token(const T* qkv, const Geometry& G, const Tile& w, int64_t r, float* qh, float* kh,
                             float* vs, float* red) {
  const T* q = qkv + r * G.row + G.k_head(w.h) * G.dk;
  const T* k = q + G.nk * G.dk;
  const T* v = qkv + r * G.row + 2 * G.nk * G.dk + w.h * G.dv + w.c0;
  float sums[2] = {0.f, 0.f};
  for (int64_t i = threadIdx.x; i < G.dk; i += blockDim.x) {
    const float qv = to_f32(q[i]), kv = to_f32(k[i]);
    qh[i] = qv;
    kh[i] = kv;
    sums[0] += qv * qv;
    sums[1] += kv * kv;
  }
  for (int64_t j = threadIdx.x; j < w.nc; j += blockDim.x) vs[j] = to_f32(v[j]);
  block_sum(sums, red);
  const float rq = rsqrtf(sums[0] + 1e-6f) * rsqrtf(static_cast<float>(G.dk)), rk = rsqrtf(sums[1] + 1e-6f);
  for (int64_t i = threadIdx.x; i < G.dk; i += blockDim.x) {
    qh[i] *= rq;
    kh[i] *= rk;
  }
  __syncthreads();
  return {sums[0], sums[1]};
}

// One recurrence step on the tile's shared state S [dk, nc] of row stride `stride`: S ← decay·S + k̂·δᵀ with
// δ = β(v − decay·Sᵀk̂), thread j updating column j; states, when given, receives S [dk, cols] after the step.
// Ends with a barrier.
__device__ void step(float* S, int64_t stride, const Geometry& G, const Tile& w, const float* kh, const float* vs,
                     float decay, float beta, float* states) {
  for (int64_t j = threadIdx.x; j < w.nc; j += blockDim.x) {
    float u = 0.f;
    for (int64_t i = 0; i < G.dk; ++i) u += S[i * stride + j] * kh[i];
    u *= decay;
    const float d = beta * (vs[j] - u);
    for (int64_t i = 0; i < G.dk; ++i) {
      S[i * stride + j] = decay * S[i * stride + j] + kh[i] * d;
      if (states) states[i * cols + j] = S[i * stride + j];
    }
  }
  __syncthreads();
}

template <typename T>
__global__ void forward_kernel(T* o, const T* qkv, const float* g, const float* beta, Geometry G) {
  extern __shared__ float smem[];
  float* S = smem;                       // [dk, cols]
  float* qh = S + G.dk * cols;           // [dk]
  float* kh = qh + G.dk;                 // [dk]
  float* vs = kh + G.dk;                 // [cols]
  float* red = vs + cols;                // [red_floats]
  const Tile w(G);
  const int64_t L = G.length(w.b);
  for (int64_t t = 0; t < G.seq; ++t) {
    const int64_t r = w.b * G.seq + t;
    T* out = o + r * G.nv * G.dv + w.h * G.dv + w.c0;
    if (t >= L) {
      for (int64_t j = threadIdx.x; j < w.nc; j += blockDim.x) out[j] = from_f32<T>(0.f);
      continue;
    }
    if (G.segment_start(w.b, t)) {
      for (int64_t e = threadIdx.x; e < G.dk * cols; e += blockDim.x) S[e] = 0.f;
      __syncthreads();
    }
    load_token(qkv, G, w, r, qh, kh, vs, red);
    step(S, cols, G, w, kh, vs, expf(g[r * G.nv + w.h]), beta[r * G.nv + w.h], nullptr);
    for (int64_t j = threadIdx.x; j < w.nc; j += blockDim.x) {
      float acc = 0.f;
      for (int64_t i = 0; i < G.dk; ++i) acc += S[i * cols + j] * qh[i];
      out[j] = from_f32<T>(acc);
    }
    __syncthreads();
  }
}

// Backward of one (sequence, v head, tile). ckpt: [chunks, dk, cols] the tile's S before each chunk; states:
// [chunk, dk, cols] its S after each token of the chunk being reversed; parts per (token, v head, tile): dq, dk of
// the raw q, k [dk] each, dg and dbeta.
template <typename T>
__global__ void backward_kernel(T* d_qkv, float* dq_part, float* dk_part, float* dg_part, float* dbeta_part,
                                const T* d_o, const T* qkv, const float* g, const float* beta, float* ckpt_all,
                                float* states_all, Geometry G) {
  extern __shared__ float smem[];
  constexpr int64_t P = cols + 1;         // padded row stride of dS and S'
  float* dS = smem;                       // [dk, P]
  float* Sp = dS + G.dk * P;              // [dk, P]: S' = decay·S_{t−1}; also the working state of recomputes
  float* qh = Sp + G.dk * P;
  float* kh = qh + G.dk;
  float* vs = kh + G.dk;                  // [cols]
  float* dos = vs + cols;                 // [cols] d_o of the token
  float* delta = dos + cols;              // [cols]
  float* vmu = delta + cols;              // [cols] v − u
  float* du = vmu + cols;                 // [cols]
  float* dqh = du + cols;                 // [dk]
  float* dkh = dqh + G.dk;                // [dk]
  float* red = dkh + G.dk;                // [red_floats]
  const Tile w(G);
  const int64_t L = G.length(w.b), tiles = G.tiles(), DD = G.dk * cols;
  const int64_t chunks = (L + chunk - 1) / chunk;
  float* ckpt = ckpt_all + static_cast<int64_t>(blockIdx.x) * ((G.seq + chunk - 1) / chunk) * DD;
  float* states = states_all + static_cast<int64_t>(blockIdx.x) * chunk * DD;
  const auto part = [&](int64_t r) { return (r * G.nv + w.h) * tiles + w.tile; };

  // Forward: S at every chunk start (Sp as the working state).
  for (int64_t e = threadIdx.x; e < G.dk * P; e += blockDim.x) Sp[e] = 0.f;
  __syncthreads();
  for (int64_t t = 0; t < L; ++t) {
    const int64_t r = w.b * G.seq + t;
    if (G.segment_start(w.b, t)) {
      for (int64_t e = threadIdx.x; e < G.dk * P; e += blockDim.x) Sp[e] = 0.f;
      __syncthreads();
    }
    if (t % chunk == 0)
      for (int64_t e = threadIdx.x; e < DD; e += blockDim.x) ckpt[t / chunk * DD + e] = Sp[e / cols * P + e % cols];
    load_token(qkv, G, w, r, qh, kh, vs, red);
    step(Sp, P, G, w, kh, vs, expf(g[r * G.nv + w.h]), beta[r * G.nv + w.h], nullptr);
  }

  for (int64_t e = threadIdx.x; e < G.dk * P; e += blockDim.x) dS[e] = 0.f;
  __syncthreads();
  for (int64_t c = chunks - 1; c >= 0; --c) {
    const int64_t t0 = c * chunk, t1 = L < t0 + chunk ? L : t0 + chunk;
    // Recompute the chunk's states from its checkpoint into `states` (Sp as the working state).
    for (int64_t e = threadIdx.x; e < DD; e += blockDim.x) Sp[e / cols * P + e % cols] = ckpt[c * DD + e];
    __syncthreads();
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r = w.b * G.seq + t;
      if (G.segment_start(w.b, t)) {
        for (int64_t e = threadIdx.x; e < G.dk * P; e += blockDim.x) Sp[e] = 0.f;
        __syncthreads();
      }
      load_token(qkv, G, w, r, qh, kh, vs, red);
      step(Sp, P, G, w, kh, vs, expf(g[r * G.nv + w.h]), beta[r * G.nv + w.h], states + (t - t0) * DD);
    }
    // Reverse over the chunk.
    for (int64_t t = t1 - 1; t >= t0; --t) {
      const int64_t r = w.b * G.seq + t;
      const float decay = expf(g[r * G.nv + w.h]), bt = beta[r * G.nv + w.h];
      const bool start = G.segment_start(w.b, t);
      const float2 sums = load_token(qkv, G, w, r, qh, kh, vs, red);
      for (int64_t j = threadIdx.x; j < w.nc; j += blockDim.x)
        dos[j] = to_f32(d_o[r * G.nv * G.dv + w.h * G.dv + w.c0 + j]);
      // S' = decay·S_{t−1}; u, δ.
      const float* prev = t > t0 ? states + (t - 1 - t0) * DD : ckpt + c * DD;
      for (int64_t j = threadIdx.x; j < w.nc; j += blockDim.x) {
        float u = 0.f;
        for (int64_t i = 0; i < G.dk; ++i) {
          const float sp = start ? 0.f : decay * prev[i * cols + j];
          Sp[i * P + j] = sp;
          u += sp * kh[i];
        }
        delta[j] = bt * (vs[j] - u);
        vmu[j] = vs[j] - u;
      }
      __syncthreads();
      // dS += q̂·doᵀ; dδ = dSᵀk̂; dv, du, dβ = Σ dδ·(v − u).
      float dbeta_sum[1] = {0.f};
      for (int64_t j = threadIdx.x; j < w.nc; j += blockDim.x) {
        float dd = 0.f;
        for (int64_t i = 0; i < G.dk; ++i) {
          dS[i * P + j] += qh[i] * dos[j];
          dd += dS[i * P + j] * kh[i];
        }
        d_qkv[r * G.row + 2 * G.nk * G.dk + w.h * G.dv + w.c0 + j] = from_f32<T>(bt * dd);
        du[j] = -bt * dd;
        dbeta_sum[0] += dd * vmu[j];
      }
      block_sum(dbeta_sum, red);  // its barriers also publish du and dS
      if (threadIdx.x == 0) dbeta_part[part(r)] = dbeta_sum[0];
      // Rows: dq̂ = S_t·do, dk̂ = dS·δ + S'·du; dS' = dS + k̂·duᵀ; dg = Σ dS'⊙S'; dS_{t−1} = decay·dS'.
      const float* St = states + (t - t0) * DD;
      const T* q = qkv + r * G.row + G.k_head(w.h) * G.dk;
      const T* k = q + G.nk * G.dk;
      float row_sums[3] = {0.f, 0.f, 0.f};  // dg; q·dq̂ and k·dk̂ (the normalisations' backward)
      for (int64_t i = threadIdx.x; i < G.dk; i += blockDim.x) {
        float a = 0.f, k2 = 0.f, gsum = 0.f;
        for (int64_t j = 0; j < w.nc; ++j) {
          a += St[i * cols + j] * dos[j];
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
      if (threadIdx.x == 0) dg_part[part(r)] = row_sums[0];
      // The normalisations' backward is linear in dq̂, dk̂: each tile's share sums to the whole.
      const float rq = rsqrtf(sums.x + 1e-6f), rk = rsqrtf(sums.y + 1e-6f), scale = rsqrtf(static_cast<float>(G.dk));
      for (int64_t i = threadIdx.x; i < G.dk; i += blockDim.x) {
        dq_part[part(r) * G.dk + i] = scale * (rq * dqh[i] - to_f32(q[i]) * rq * rq * rq * row_sums[1]);
        dk_part[part(r) * G.dk + i] = rk * dkh[i] - to_f32(k[i]) * rk * rk * rk * row_sums[2];
      }
      __syncthreads();
    }
  }
}

// d_qkv's q and k columns: the sum over each k head's v heads and their tiles, in order (zero on padding: the parts
// are zero there).
template <typename T>
__global__ void sum_qk_kernel(T* d_qkv, const float* dq_part, const float* dk_part, int64_t T_, Geometry G) {
  const int64_t n = T_ * G.nk * G.dk, group = G.nv / G.nk, tiles = G.tiles();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
    const int64_t r = e / (G.nk * G.dk), kh = e / G.dk % G.nk, i = e % G.dk;
    float aq = 0.f, ak = 0.f;
    for (int64_t p = (r * G.nv + kh * group) * tiles; p < (r * G.nv + (kh + 1) * group) * tiles; ++p) {
      aq += dq_part[p * G.dk + i];
      ak += dk_part[p * G.dk + i];
    }
    d_qkv[r * G.row + kh * G.dk + i] = from_f32<T>(aq);
    d_qkv[r * G.row + G.nk * G.dk + kh * G.dk + i] = from_f32<T>(ak);
  }
}

// dg, dbeta [T, nv]: the sums over the tiles, in order.
__global__ void sum_gates_kernel(float* dg, float* dbeta, const float* dg_part, const float* dbeta_part, int64_t n,
                                 int64_t tiles) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
    float a = 0.f, b = 0.f;
    for (int64_t p = e * tiles; p < (e + 1) * tiles; ++p) {
      a += dg_part[p];
      b += dbeta_part[p];
    }
    dg[e] = a;
    dbeta[e] = b;
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
  const size_t smem = static_cast<size_t>(G.dk * cols + 2 * G.dk + cols + red_floats) * sizeof(float);
  MT_CUDA_CHECK("gated_delta_rule_forward",
                cudaFuncSetAttribute(forward_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(smem)));
  const auto blocks = static_cast<unsigned>(shape.batch * G.nv * G.tiles());
  forward_kernel<T><<<blocks, threads, smem, s>>>(o, qkv, g, beta, G);
  MT_CHECK_LAUNCH("gated_delta_rule_forward", "batch={} seq={} heads {}/{} dims {}/{}", shape.batch, shape.seq, G.nk,
                  G.nv, G.dk, G.dv);
}

template <typename T>
void gated_delta_rule_backward(T* d_qkv, float* dg, float* dbeta, const T* d_o, const T* qkv, const float* g,
                               const float* beta, const DeltaRuleShape& shape, cudaStream_t s) {
  check_shape("gated_delta_rule_backward", shape);
  if (shape.batch == 0) return;
  const Geometry G = geometry(shape);
  const int64_t T_ = shape.batch * shape.seq, tiles = G.tiles(), blocks = shape.batch * G.nv * tiles;
  const int64_t parts = T_ * G.nv * tiles, DD = G.dk * cols;
  MT_CUDA_CHECK("gated_delta_rule_backward", cudaMemsetAsync(d_qkv, 0, T_ * G.row * sizeof(T), s));
  const Scratch<float> dq_part("gated_delta_rule_backward", parts * G.dk, s);
  const Scratch<float> dk_part("gated_delta_rule_backward", parts * G.dk, s);
  const Scratch<float> gate_parts("gated_delta_rule_backward", 2 * parts, s);
  for (const Scratch<float>* p : {&dq_part, &dk_part})
    MT_CUDA_CHECK("gated_delta_rule_backward", cudaMemsetAsync(p->get(), 0, parts * G.dk * sizeof(float), s));
  MT_CUDA_CHECK("gated_delta_rule_backward", cudaMemsetAsync(gate_parts.get(), 0, 2 * parts * sizeof(float), s));
  const Scratch<float> ckpt("gated_delta_rule_backward", blocks * ((shape.seq + chunk - 1) / chunk) * DD, s);
  const Scratch<float> states("gated_delta_rule_backward", blocks * chunk * DD, s);
  const size_t smem = static_cast<size_t>(2 * G.dk * (cols + 1) + 4 * G.dk + 5 * cols + red_floats) * sizeof(float);
  MT_CUDA_CHECK("gated_delta_rule_backward",
                cudaFuncSetAttribute(backward_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(smem)));
  backward_kernel<T><<<static_cast<unsigned>(blocks), threads, smem, s>>>(
      d_qkv, dq_part.get(), dk_part.get(), gate_parts.get(), gate_parts.get() + parts, d_o, qkv, g, beta, ckpt.get(),
      states.get(), G);
  sum_qk_kernel<T><<<grid_for(T_ * G.nk * G.dk, 256), 256, 0, s>>>(d_qkv, dq_part.get(), dk_part.get(), T_, G);
  sum_gates_kernel<<<grid_for(T_ * G.nv, 256), 256, 0, s>>>(dg, dbeta, gate_parts.get(), gate_parts.get() + parts,
                                                            T_ * G.nv, tiles);
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
