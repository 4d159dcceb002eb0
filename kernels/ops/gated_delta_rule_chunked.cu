// The gated delta rule on the GPU in chunked form (the WY representation of flash-linear-attention's chunk kernels;
// the algorithm, stage by stage, of src/backend/cpu/gated_delta_rule_chunked.cpp, whose comment has the formulas).
// Chunks of C = 64 tokens for bf16 (products on tensor cores, kernels/ops/block_mm.cuh) and 32 for fp32 (FMA loops);
// states and accumulation fp32. Only the state recurrences walk the chunks in turn; everything else runs one block
// per (sequence, v head, chunk). Forward: q̂, k̂ normalised once per k head; per chunk the masked scores
// P = Q̂K̂ᵀ ⊙ D, T = (I + A)⁻¹, U and W (prep); per (sequence, v head, 32 state columns) the state recurrence over
// the chunks, writing the output of its columns chunk by chunk. Backward: the forward's stages again, the
// recurrence keeping the state entering each chunk and V' instead of the output; the state gradient recurrence in
// reverse (per 32 state columns, keeping the gradient of the state leaving each chunk and dV'); per chunk, in one
// kernel, the gradients through the output and the state (dq̂, dW, part of dk̂) and through the WY representation
// (dv, dβ, dg, the rest of dk̂); per token and k head the v heads' dq̂, dk̂ summed in head order through the
// normalisations. Per-chunk kernels copy their tiles in with asynchronous 16-byte copies while they compute the
// chunk's gates; the recurrences fetch the next chunk's gates during the current one. States are kept in fp32 and
// stored at the element type (the precision of the products that read them). Scratch: one allocation laid out by
// src/backend/gated_delta_rule_scratch.h.
// Invariant: the CPU reference's semantics (state zero at every sequence and segment start, o = 0 and no gradient on
// padding); no atomics, every sum in a fixed order (deterministic).
#include <string>
#include <type_traits>

#include "backend/gated_delta_rule_scratch.h"
#include "kernels/ops/async_copy.cuh"
#include "kernels/ops/block_mm.cuh"
#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

// Threads per block: 8 warps (at least one thread per chunk row), two blocks per SM where shared memory allows
// (__launch_bounds__ keeps the registers to that); 16 warps for the per-chunk gradient kernel, whose shared memory
// allows one block per SM.
constexpr int threads = 256;
constexpr int grad_threads = 512;
constexpr int state_cols = 32;  // state columns per block of the (reverse) recurrence
template <typename T> inline constexpr int chunk_of = static_cast<int>(delta_rule_chunk(sizeof(T)));
static_assert(chunk_of<float> <= threads && chunk_of<__nv_bfloat16> <= threads);

int padded16(int64_t d) { return static_cast<int>((d + 15) / 16 * 16); }

struct Geo {
  int64_t seq, nk, nv, dk, dv, row, chunks;  // row: elements per token of qkv; chunks per sequence
  int dkp, dvp;                              // head dims padded to 16
  const int32_t* seq_lens;
  const int32_t* segments;
  __device__ int64_t length(int64_t b) const { return seq_lens ? seq_lens[b] : seq; }
  __device__ bool segment_start(int64_t b, int64_t t) const {
    return t == 0 || (segments && segments[b * seq + t] != segments[b * seq + t - 1]);
  }
  __device__ int64_t k_head(int64_t h) const { return h / (nv / nk); }
};

// Scratch arrays (see gated_delta_rule_scratch.h); per (sequence, v head, chunk) index bhc = (b·nv + h)·chunks + c.
template <typename T>
struct Bufs {
  T *qn, *kn;
  T *tm, *p;  // T = (I + A)⁻¹ (backward only); the masked scores Q̂K̂ᵀ ⊙ D (s ≤ r)
  T *u, *vn, *w;
  T *h, *dh;  // kept in fp32 by the recurrences, stored as T (the precision of the products that read them)
  T* dvn;
  float *dq_part, *dk_part;
};

// The block's barrier, once this thread's asynchronous copies (load_tile) have landed: after it every thread sees
// every tile loaded before it.
__device__ __forceinline__ void barrier() {
  wait_async_copies();
  __syncthreads();
}

// One chunk's gates and masks, as the CPU's ChunkGates; padding rows are their own segment with zero gates.
template <int C>
struct Gates {
  float beta[C], gam[C], Gam[C], e[C];
  int seg[C];
  int n, carries;
  float Gam_last;
  // exp(γ_r − γ_s) in one segment, else 0; only called for s ≤ r (γ falls, so the exponent is ≤ 0).
  __device__ float D(int r, int s) const { return seg[r] == seg[s] ? expf(gam[r] - gam[s]) : 0.f; }
};

// One row of a chunk's gate inputs, fetched into the registers of the thread of that row (threads below C) by
// fetch_gate_row and taken in by chunk_gates, so that the sequential kernels can fetch the next chunk's while they
// work on the current one. starts: the row starts a segment; n: the chunk's valid rows.
struct GateRow {
  float g = 0.f, beta = 0.f;
  int starts = 0, n = 0;
};

template <int C>
__device__ GateRow fetch_gate_row(const Geo& G, const float* g, const float* beta, int64_t b, int64_t h, int64_t c) {
  GateRow f;
  const int64_t t0 = c * C, L = G.length(b);
  f.n = static_cast<int>(L - t0 < 0 ? 0 : (L - t0 < C ? L - t0 : C));
  const int r = threadIdx.x;
  if (r < f.n) {
    const int64_t row = b * G.seq + t0 + r;
    f.g = g[row * G.nv + h];
    f.beta = beta[row * G.nv + h];
    f.starts = G.segment_start(b, t0 + r) ? 1 : 0;
  }
  return f;
}

// Fills q from the rows fetched by every thread below C: γ's running sums restarting at segment starts and the
// segment indices by a segmented scan in warp 0 (each lane C/32 consecutive rows, then across the lanes in a fixed
// order), the exponentials one row per thread. Starts and ends with a barrier that does not wait for the block's
// asynchronous copies (which stay in flight over it).
template <int C>
__device__ void chunk_gates(Gates<C>& q, const GateRow& f) {
  static_assert(C % 32 == 0);
  __syncthreads();
  const int n = f.n;
  if (threadIdx.x < C) {
    const int r = threadIdx.x;
    q.gam[r] = f.g;                          // g until the running sums below
    q.beta[r] = f.beta;
    q.seg[r] = r > 0 && f.starts ? 1 : 0;    // restarts until the running sums below
    if (r == 0) {
      q.n = n;
      q.carries = n > 0 && !f.starts;
    }
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    constexpr int K = C / 32;
    const int lane = threadIdx.x;
    float x[K];
    int cnt[K];
    bool reset[K];
    float run = 0.f;
    int count = 0;
    bool any = false;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int r = lane * K + k;
      const bool restart = q.seg[r] != 0;
      if (r == 0 || restart) {
        run = 0.f;
        any = true;
      }
      run += q.gam[r];
      count += restart ? 1 : 0;
      x[k] = run;
      cnt[k] = count;
      reset[k] = any;
    }
    // Inclusive scan over the lanes of (reset seen, sum since the last reset, restarts).
    float v = run;
    int c = count, rs = any ? 1 : 0;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const float pv = __shfl_up_sync(0xffffffffu, v, o);
      const int pc = __shfl_up_sync(0xffffffffu, c, o), pr = __shfl_up_sync(0xffffffffu, rs, o);
      if (lane >= o) {
        if (!rs) v += pv;
        rs |= pr;
        c += pc;
      }
    }
    float before = __shfl_up_sync(0xffffffffu, v, 1);
    int seg_before = __shfl_up_sync(0xffffffffu, c, 1);
    if (lane == 0) {
      before = 0.f;
      seg_before = 0;
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int r = lane * K + k;
      q.gam[r] = reset[k] ? x[k] : before + x[k];
      q.seg[r] = seg_before + cnt[k];
    }
  }
  __syncthreads();
  if (threadIdx.x < C) {
    const int r = threadIdx.x;
    q.Gam[r] = r < n && q.carries && q.seg[r] == 0 ? expf(q.gam[r]) : 0.f;
    q.e[r] = r < n && q.seg[r] == q.seg[n - 1] ? expf(q.gam[n - 1] - q.gam[r]) : 0.f;
    if (r == 0) q.Gam_last = n > 0 && q.carries && q.seg[n - 1] == 0 ? expf(q.gam[n - 1]) : 0.f;
    if (r >= n) {  // padding: its own segment, γ zero (no thread reads these rows here)
      q.seg[r] = C;
      q.gam[r] = 0.f;
    }
  }
  __syncthreads();
}

// Accesses in flight per thread in the tile copies below: each thread issues this many loads before it stores any,
// so a copy costs about one memory latency rather than one per element.
constexpr int copies_in_flight = 4;

// dst[r, j] (row stride ld) ← sign·scale_r·src[r·src_ld + j] as T for r < rows_valid and j < cols_valid, 0
// elsewhere in [rows, cols). In 16-byte accesses of src where the pointer, the strides and the column counts allow
// (head dims multiples of 8 for bf16, of 4 for fp32), else element by element; a plain copy from global memory in
// 16-byte asynchronous copies. No barrier: the tile is there after barrier() (which waits for the copies).
template <typename T, typename S>
__device__ void load_tile(T* dst, int ld, const S* src, int64_t src_ld, int rows, int cols, int rows_valid,
                          int64_t cols_valid, const float* row_scale = nullptr, float sign = 1.f) {
  constexpr int V = vec16<S>;
  const bool packed = reinterpret_cast<uintptr_t>(src) % 16 == 0 && src_ld % V == 0 && cols % V == 0 &&
                      ld % V == 0 && (cols_valid >= cols || cols_valid % V == 0);
  const int step = copies_in_flight * static_cast<int>(blockDim.x);
  if constexpr (std::is_same_v<T, S>) {
    if (packed && row_scale == nullptr && sign == 1.f && is_global(src)) {  // a plain copy: asynchronous
      const int units = cols / V, total = rows * units;
      for (int e = threadIdx.x; e < total; e += blockDim.x) {
        const int r = e / units, j = e % units * V;
        if (r < rows_valid && j < cols_valid) {
          copy16_async(dst + r * ld + j, src + r * src_ld + j);
        } else {
          Pack<T, V> zero;
#pragma unroll
          for (int i = 0; i < V; ++i) zero.v[i] = from_f32<T>(0.f);
          *reinterpret_cast<Pack<T, V>*>(dst + r * ld + j) = zero;
        }
      }
      return;
    }
  }
  if (packed) {
    const int units = cols / V, total = rows * units;
    for (int base = threadIdx.x; base < total; base += step) {
      Pack<S, V> in[copies_in_flight];
#pragma unroll
      for (int u = 0; u < copies_in_flight; ++u) {
        const int e = base + u * static_cast<int>(blockDim.x), r = e / units, j = e % units * V;
        if (e < total && r < rows_valid && j < cols_valid) {
          in[u] = *reinterpret_cast<const Pack<S, V>*>(src + r * src_ld + j);
        } else {
#pragma unroll
          for (int i = 0; i < V; ++i) in[u].v[i] = from_f32<S>(0.f);
        }
      }
#pragma unroll
      for (int u = 0; u < copies_in_flight; ++u) {
        const int e = base + u * static_cast<int>(blockDim.x), r = e / units, j = e % units * V;
        if (e >= total) break;
        const float a = row_scale && r < rows_valid ? sign * row_scale[r] : sign;
        Pack<T, V> out;
#pragma unroll
        for (int i = 0; i < V; ++i) out.v[i] = from_f32<T>(a * to_f32(in[u].v[i]));
        *reinterpret_cast<Pack<T, V>*>(dst + r * ld + j) = out;
      }
    }
    return;
  }
  const int total = rows * cols;
  for (int base = threadIdx.x; base < total; base += step) {
    float in[copies_in_flight];
#pragma unroll
    for (int u = 0; u < copies_in_flight; ++u) {
      const int e = base + u * static_cast<int>(blockDim.x), r = e / cols, j = e % cols;
      in[u] = e < total && r < rows_valid && j < cols_valid ? to_f32(src[r * src_ld + j]) : 0.f;
    }
#pragma unroll
    for (int u = 0; u < copies_in_flight; ++u) {
      const int e = base + u * static_cast<int>(blockDim.x), r = e / cols, j = e % cols;
      if (e >= total) break;
      const float a = row_scale && r < rows_valid ? sign * row_scale[r] : sign;
      dst[r * ld + j] = from_f32<T>(a * in[u]);
    }
  }
}

// dst[r·dst_ld + j] ← sign·src[r, j] as T for r < rows_valid, 0 for rows_valid ≤ r < rows, j < cols. In 16-byte
// stores where the pointer, the strides and the column count allow. No barrier.
template <typename T>
__device__ void store_tile(T* dst, int64_t dst_ld, const float* src, int ld, int rows, int64_t cols,
                           float sign = 1.f, int rows_valid = 1 << 30) {
  constexpr int V = vec16<T>;
  if (reinterpret_cast<uintptr_t>(dst) % 16 == 0 && dst_ld % V == 0 && cols % V == 0) {
    const int units = static_cast<int>(cols / V);
    for (int e = threadIdx.x; e < rows * units; e += blockDim.x) {
      const int r = e / units, j = e % units * V;
      Pack<T, V> out;
#pragma unroll
      for (int i = 0; i < V; ++i) out.v[i] = from_f32<T>(r < rows_valid ? sign * src[r * ld + j + i] : 0.f);
      *reinterpret_cast<Pack<T, V>*>(dst + r * dst_ld + j) = out;
    }
    return;
  }
  for (int e = threadIdx.x; e < rows * cols; e += blockDim.x) {
    const int r = static_cast<int>(e / cols), j = static_cast<int>(e % cols);
    dst[r * dst_ld + j] = from_f32<T>(r < rows_valid ? sign * src[r * ld + j] : 0.f);
  }
}

// x[r, j] ← T(a_r·x[r, j]) over [rows, cols). No barrier.
template <typename T>
__device__ void scale_rows(T* x, int ld, int rows, int cols, const float* a) {
  for (int e = threadIdx.x; e < rows * cols; e += blockDim.x) {
    const int r = e / cols, j = e % cols;
    x[r * ld + j] = from_f32<T>(a[r] * to_f32(x[r * ld + j]));
  }
}

// The sum of v over the block in a fixed order (warps' sums in warp order), on every thread; red: threads/32 floats.
__device__ float block_total(float v, float* red) {
  v = warp_sum(v);
  barrier();
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  barrier();
  float s = 0.f;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) s += red[w];
  return s;
}

// load_tile's copy of src into dst (no scale), returning this thread's Σ old dst·new dst over the elements it
// copies (each thread's elements fixed, so block_total of it is deterministic). Synchronous; no barrier.
template <typename T>
__device__ float load_tile_dot(T* dst, int ld, const T* src, int64_t src_ld, int rows, int cols, int rows_valid,
                               int64_t cols_valid) {
  constexpr int V = vec16<T>;
  float acc = 0.f;
  const bool packed = reinterpret_cast<uintptr_t>(src) % 16 == 0 && src_ld % V == 0 && cols % V == 0 &&
                      ld % V == 0 && (cols_valid >= cols || cols_valid % V == 0);
  const int step = copies_in_flight * static_cast<int>(blockDim.x);
  const int units = packed ? cols / V : cols, width = packed ? V : 1, total = rows * units;
  for (int base = threadIdx.x; base < total; base += step) {
    Pack<T, V> in[copies_in_flight];
#pragma unroll
    for (int u = 0; u < copies_in_flight; ++u) {
      const int e = base + u * static_cast<int>(blockDim.x), r = e / units, j = e % units * width;
#pragma unroll
      for (int i = 0; i < V; ++i) in[u].v[i] = from_f32<T>(0.f);
      if (e < total && r < rows_valid && j < cols_valid) {
        if (packed)
          in[u] = *reinterpret_cast<const Pack<T, V>*>(src + r * src_ld + j);
        else
          in[u].v[0] = src[r * src_ld + j];
      }
    }
#pragma unroll
    for (int u = 0; u < copies_in_flight; ++u) {
      const int e = base + u * static_cast<int>(blockDim.x), r = e / units, j = e % units * width;
      if (e >= total) break;
      for (int i = 0; i < width; ++i) {
        acc += to_f32(dst[r * ld + j + i]) * to_f32(in[u].v[i]);
        dst[r * ld + j + i] = in[u].v[i];
      }
    }
  }
  return acc;
}

// Shared-memory carving: 128-byte aligned pieces.
struct Carve {
  int bytes = 0;
  int take(int64_t n) {
    const int at = bytes;
    bytes += static_cast<int>((n + 127) / 128 * 128);
    return at;
  }
};

template <typename E>
__device__ E* at(unsigned char* smem, int offset) {
  return reinterpret_cast<E*>(smem + offset);
}

// ---- Forward stages ----

// q̂ = q·rsqrt(Σq² + 1e-6)/sqrt(dk), k̂ = k·rsqrt(Σk² + 1e-6) per (token, k head), one warp each.
template <typename T>
__global__ void normalize_kernel(T* qn, T* kn, const T* qkv, Geo G, int64_t items) {
  const int64_t item = static_cast<int64_t>(blockIdx.x) * (threads / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (item >= items) return;
  const int64_t row = item / G.nk, kh = item % G.nk;
  const T* q = qkv + row * G.row + kh * G.dk;
  const T* k = q + G.nk * G.dk;
  float sq = 0.f, sk = 0.f;
  for (int64_t i = lane; i < G.dk; i += 32) {
    sq += to_f32(q[i]) * to_f32(q[i]);
    sk += to_f32(k[i]) * to_f32(k[i]);
  }
  sq = warp_sum(sq);
  sk = warp_sum(sk);
  const float rq = rsqrtf(sq + 1e-6f) * rsqrtf(static_cast<float>(G.dk)), rk = rsqrtf(sk + 1e-6f);
  for (int64_t i = lane; i < G.dk; i += 32) {
    qn[item * G.dk + i] = from_f32<T>(to_f32(q[i]) * rq);
    kn[item * G.dk + i] = from_f32<T>(to_f32(k[i]) * rk);
  }
}

template <typename T>
struct PrepSmem {
  int gates, q, k, v, a, tf, tt, cf, xs, bytes;  // cf reuses a and tf once T is taken
  PrepSmem(const Geo& G) {
    constexpr int C = chunk_of<T>;
    const int64_t a_floats = int64_t{C} * (C + 8), cf_floats = int64_t{C} * ((G.dkp > G.dvp ? G.dkp : G.dvp) + 8);
    Carve c;
    gates = c.take(sizeof(Gates<C>));
    q = c.take(int64_t{C} * (G.dkp + 8) * sizeof(T));
    k = c.take(int64_t{C} * (G.dkp + 8) * sizeof(T));
    v = c.take(int64_t{C} * (G.dvp + 8) * sizeof(T));
    tt = c.take(int64_t{C} * (C + 8) * sizeof(T));
    a = cf = c.take((2 * a_floats > cf_floats ? 2 * a_floats : cf_floats) * 4);
    tf = a + static_cast<int>(a_floats * 4);
    xs = c.take(int64_t{16} * (C + 8) * 4);
    bytes = c.bytes;
  }
};

// Per (sequence, v head, chunk): the masked scores P = Q̂K̂ᵀ ⊙ D (s ≤ r), T = (I + A)⁻¹ (fp32, by 16-row blocks;
// stored for the backward), U = T·(β ⊙ V), W = T·(βΓ ⊙ K̂).
template <typename T>
__global__ void __launch_bounds__(threads, 2)
    prep_kernel(Bufs<T> s, const T* qkv, const float* g, const float* beta, Geo G, PrepSmem<T> L) {
  constexpr int C = chunk_of<T>;
  extern __shared__ __align__(128) unsigned char smem[];
  const int64_t bhc = blockIdx.x, c = bhc % G.chunks, h = bhc / G.chunks % G.nv, b = bhc / G.chunks / G.nv;
  const GateRow f = fetch_gate_row<C>(G, g, beta, b, h, c);
  if (f.n == 0) return;
  T *Q = at<T>(smem, L.q), *K = at<T>(smem, L.k), *V = at<T>(smem, L.v), *Tt = at<T>(smem, L.tt);
  float *A = at<float>(smem, L.a), *Tf = at<float>(smem, L.tf), *Cf = at<float>(smem, L.cf);
  const int ldk = G.dkp + 8, ldv = G.dvp + 8, ldc = C + 8, ldf = (G.dkp > G.dvp ? G.dkp : G.dvp) + 8;
  const int64_t row0 = b * G.seq + c * C;
  const int64_t qk_row = (row0 * G.nk + G.k_head(h)) * G.dk;
  load_tile(Q, ldk, s.qn + qk_row, G.nk * G.dk, C, G.dkp, f.n, G.dk);
  load_tile(K, ldk, s.kn + qk_row, G.nk * G.dk, C, G.dkp, f.n, G.dk);
  load_tile(V, ldv, qkv + row0 * G.row + 2 * G.nk * G.dk + h * G.dv, G.row, C, G.dvp, f.n, G.dv);
  Gates<C>& q = *at<Gates<C>>(smem, L.gates);
  chunk_gates(q, f);
  barrier();
  block_mm<false, true>(A, ldc, K, ldk, K, ldk, C, C, G.dkp, false);
  block_mm<false, true>(Tf, ldc, Q, ldk, K, ldk, C, C, G.dkp, false);
  T* p = s.p + bhc * C * C;
  for (int e = threadIdx.x; e < C * C; e += blockDim.x) {
    const int r = e / C, t = e % C;
    const float d = t <= r ? q.D(r, t) : 0.f;
    p[e] = from_f32<T>(t <= r ? Tf[r * ldc + t] * d : 0.f);
    A[r * ldc + t] = t < r ? q.beta[r] * A[r * ldc + t] * d : 0.f;
    Tf[r * ldc + t] = 0.f;
  }
  barrier();
  // T by 16-row blocks: the diagonal blocks (I + A_ii)⁻¹ by forward substitution, one warp each (a lane per column,
  // rows in turn); then block row i, T_ij = −T_ii·X_ij with X_ij = Σ_{j ≤ k < i} A_ik·T_kj (X in Xs [16, 16·i]).
  float* Xs = at<float>(smem, L.xs);
  static_assert(C / 16 <= threads / 32);
  if (threadIdx.x / 32 < C / 16) {
    const int d = threadIdx.x / 32 * 16, t = threadIdx.x % 32;
    for (int r = 0; r < 16; ++r) {
      if (t <= r) {
        float acc = 0.f;
        for (int m = t; m < r; ++m) acc += A[(d + r) * ldc + d + m] * Tf[(d + m) * ldc + d + t];
        Tf[(d + r) * ldc + d + t] = t == r ? 1.f : -acc;
      }
      __syncwarp();
    }
  }
  barrier();
  for (int i = 16; i < C; i += 16) {
    for (int e = threadIdx.x; e < 16 * i; e += blockDim.x) {
      const int a = e / i, col = e % i;
      float acc = 0.f;
      for (int m = col / 16 * 16; m < i; ++m) acc += A[(i + a) * ldc + m] * Tf[m * ldc + col];
      Xs[a * ldc + col] = acc;
    }
    barrier();
    for (int e = threadIdx.x; e < 16 * i; e += blockDim.x) {
      const int a = e / i, col = e % i;
      float acc = 0.f;
      for (int m = 0; m < 16; ++m) acc += Tf[(i + a) * ldc + i + m] * Xs[m * ldc + col];
      Tf[(i + a) * ldc + col] = -acc;
    }
    barrier();
  }
  for (int e = threadIdx.x; e < C * C; e += blockDim.x) {
    const int r = e / C, t = e % C;
    const T x = from_f32<T>(Tf[r * ldc + t]);
    Tt[r * ldc + t] = x;
    if (s.tm) s.tm[bhc * C * C + e] = x;  // for the backward
  }
  for (int e = threadIdx.x; e < C * G.dkp; e += blockDim.x) {
    const int r = e / G.dkp, i = e % G.dkp;
    K[r * ldk + i] = from_f32<T>(q.beta[r] * q.Gam[r] * to_f32(K[r * ldk + i]));
  }
  for (int e = threadIdx.x; e < C * G.dvp; e += blockDim.x) {
    const int r = e / G.dvp, j = e % G.dvp;
    V[r * ldv + j] = from_f32<T>(q.beta[r] * to_f32(V[r * ldv + j]));
  }
  barrier();
  block_mm<false, false>(Cf, ldf, Tt, ldc, V, ldv, C, G.dvp, C, false);
  store_tile(s.u + bhc * C * G.dv, G.dv, Cf, ldf, C, G.dv);
  barrier();
  block_mm<false, false>(Cf, ldf, Tt, ldc, K, ldk, C, G.dkp, C, false);
  store_tile(s.w + bhc * C * G.dk, G.dk, Cf, ldf, C, G.dk);
}

template <typename T>
struct StateSmem {
  int gates, hf, ht, w, k, cf, vt, q, pt, bytes;  // cf: W·S, then V' or block_mm2_store's stage
  StateSmem(const Geo& G) {
    constexpr int C = chunk_of<T>, ldt = state_cols + 8;
    const int64_t ldk = G.dkp + 8, cf_floats = int64_t{C} * ldt;
    Carve c;
    gates = c.take(sizeof(Gates<C>));
    hf = c.take(int64_t{G.dkp} * ldt * 4);
    ht = c.take(int64_t{G.dkp} * ldt * sizeof(T));
    w = c.take(C * ldk * sizeof(T));
    k = c.take(C * ldk * sizeof(T));
    cf = c.take((cf_floats > threads / 32 * 256 ? cf_floats : threads / 32 * 256) * 4);
    vt = c.take(int64_t{C} * ldt * sizeof(T));
    q = c.take(C * ldk * sizeof(T));
    pt = c.take(int64_t{C} * (C + 8) * sizeof(T));
    bytes = c.bytes;
  }
};

// Per (sequence, v head, 32 state columns), chunk by chunk, S the state entering the chunk: V' = U − W·S, then
// S ← Γ_last·S + (e ⊙ K̂)ᵀ·V' (zero first where a segment starts with the chunk). With o (the forward), the chunk's
// output in these columns, O = (Γ ⊙ Q̂)·S + P·V'; without (the backward's recomputation), S and V' kept for the
// gradient kernels. The chunk's tiles are copied in asynchronously while its gates are computed; its gates are
// fetched during the chunk before.
template <typename T>
__global__ void __launch_bounds__(threads, 2)
    state_kernel(T* o, Bufs<T> s, const float* g, const float* beta, Geo G, StateSmem<T> L) {
  constexpr int C = chunk_of<T>, BV = state_cols, ldt = BV + 8;
  extern __shared__ __align__(128) unsigned char smem[];
  const int64_t tiles = (G.dvp + BV - 1) / BV, tile = blockIdx.x % tiles, h = blockIdx.x / tiles % G.nv,
                b = blockIdx.x / tiles / G.nv, j0 = tile * BV, nc = G.dv - j0 < BV ? G.dv - j0 : BV;
  Gates<C>& q = *at<Gates<C>>(smem, L.gates);
  float *Hf = at<float>(smem, L.hf), *Cf = at<float>(smem, L.cf);
  T *Ht = at<T>(smem, L.ht), *Wt = at<T>(smem, L.w), *Kt = at<T>(smem, L.k), *Vt = at<T>(smem, L.vt),
    *Qt = at<T>(smem, L.q), *Pt = at<T>(smem, L.pt);
  const int ldk = G.dkp + 8, ldc = C + 8;
  for (int e = threadIdx.x; e < G.dkp * ldt; e += blockDim.x) Hf[e] = 0.f;
  const int64_t L_b = G.length(b), chunks = (L_b + C - 1) / C;
  GateRow cur = fetch_gate_row<C>(G, g, beta, b, h, 0);
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t bhc = (b * G.nv + h) * G.chunks + c, row0 = b * G.seq + c * C,
                  qk_row = (row0 * G.nk + G.k_head(h)) * G.dk;
    load_tile(Wt, ldk, s.w + bhc * C * G.dk, G.dk, C, G.dkp, C, G.dk);
    load_tile(Kt, ldk, s.kn + qk_row, G.nk * G.dk, C, G.dkp, cur.n, G.dk);
    load_tile(Vt, ldt, s.u + bhc * C * G.dv + j0, G.dv, C, BV, C, nc);  // U, V' below
    if (o) {
      load_tile(Qt, ldk, s.qn + qk_row, G.nk * G.dk, C, G.dkp, cur.n, G.dk);
      load_tile(Pt, ldc, s.p + bhc * C * C, C, C, C, C, C);
    }
    chunk_gates(q, cur);
    if (c + 1 < chunks) cur = fetch_gate_row<C>(G, g, beta, b, h, c + 1);  // in flight over this chunk
    if (!q.carries)
      for (int e = threadIdx.x; e < G.dkp * ldt; e += blockDim.x) Hf[e] = 0.f;
    __syncthreads();
    if (!o) store_tile(s.h + bhc * G.dk * G.dv + j0, G.dv, Hf, ldt, static_cast<int>(G.dk), nc);
    load_tile(Ht, ldt, Hf, ldt, G.dkp, BV, G.dkp, BV);
    barrier();
    block_mm<false, false>(Cf, ldt, Wt, ldk, Ht, ldt, C, BV, G.dkp, false);
    for (int e = threadIdx.x; e < C * BV; e += blockDim.x) {
      const int r = e / BV, j = e % BV;
      const float v = to_f32(from_f32<T>(j < nc ? to_f32(Vt[r * ldt + j]) - Cf[r * ldt + j] : 0.f));
      Cf[r * ldt + j] = v;  // V', stored below
      Vt[r * ldt + j] = from_f32<T>(v);
    }
    scale_rows(Kt, ldk, C, G.dkp, q.e);
    if (o) scale_rows(Qt, ldk, C, G.dkp, q.Gam);
    for (int e = threadIdx.x; e < G.dkp * BV; e += blockDim.x) Hf[e / BV * ldt + e % BV] *= q.Gam_last;
    barrier();
    if (o) {
      const int rows = static_cast<int>(G.seq - c * C < C ? G.seq - c * C : C);
      block_mm2_store(o + row0 * G.nv * G.dv + h * G.dv + j0, G.nv * G.dv, rows, nc, q.n, Qt, ldk, Ht, ldt, G.dkp,
                      Pt, ldc, Vt, ldt, C, C, BV, Cf);
    } else {
      store_tile(s.vn + bhc * C * G.dv + j0, G.dv, Cf, ldt, C, nc);
    }
    block_mm<true, false>(Hf, ldt, Kt, ldk, Vt, ldt, G.dkp, BV, C, true);
  }
  if (o && chunks * C < G.seq)  // the chunks past the sequence's length: padding, o = 0
    store_tile(o + (b * G.seq + chunks * C) * G.nv * G.dv + h * G.dv + j0, G.nv * G.dv, Cf, 0,
               static_cast<int>(G.seq - chunks * C), nc, 1.f, 0);
}

// ---- Backward stages ----

template <typename T>
struct StateGradSmem {
  int gates, q, k, w, pt, dot, dhf, dht, cf, dvt, bytes;
  StateGradSmem(const Geo& G) {
    constexpr int C = chunk_of<T>, ldt = state_cols + 8;
    const int ldk = G.dkp + 8;
    Carve c;
    gates = c.take(sizeof(Gates<C>));
    q = c.take(int64_t{C} * ldk * sizeof(T));
    k = c.take(int64_t{C} * ldk * sizeof(T));
    w = c.take(int64_t{C} * ldk * sizeof(T));
    pt = c.take(int64_t{C} * (C + 8) * sizeof(T));
    dot = c.take(int64_t{C} * ldt * sizeof(T));
    dhf = c.take(int64_t{G.dkp} * ldt * 4);
    dht = c.take(int64_t{G.dkp} * ldt * sizeof(T));
    cf = c.take(int64_t{C} * ldt * 4);
    dvt = c.take(int64_t{C} * ldt * sizeof(T));
    bytes = c.bytes;
  }
};

// Per (sequence, v head, 32 state columns), last chunk first, dS the gradient of the state leaving the chunk: keep
// it, dV' = Pᵀ·dO + (e ⊙ K̂)·dS, then dS ← Γ_last·dS + Q̂ᵀ·(Γ ⊙ dO) − Wᵀ·dV' (zero where a segment starts with the
// chunk). The chunk's tiles are copied in asynchronously while its gates are computed; its gates are fetched
// during the chunk before.
template <typename T>
__global__ void __launch_bounds__(threads, 2)
    state_grad_kernel(Bufs<T> s, const T* d_o, const float* g, const float* beta, Geo G, StateGradSmem<T> L) {
  constexpr int C = chunk_of<T>, BV = state_cols, ldt = BV + 8;
  extern __shared__ __align__(128) unsigned char smem[];
  const int64_t tiles = (G.dvp + BV - 1) / BV, tile = blockIdx.x % tiles, h = blockIdx.x / tiles % G.nv,
                b = blockIdx.x / tiles / G.nv, j0 = tile * BV, nc = G.dv - j0 < BV ? G.dv - j0 : BV;
  Gates<C>& q = *at<Gates<C>>(smem, L.gates);
  T *Q = at<T>(smem, L.q), *K = at<T>(smem, L.k), *Wt = at<T>(smem, L.w), *Pt = at<T>(smem, L.pt),
    *dOt = at<T>(smem, L.dot), *DHt = at<T>(smem, L.dht), *dVt = at<T>(smem, L.dvt);
  float *DHf = at<float>(smem, L.dhf), *Cf = at<float>(smem, L.cf);
  const int ldk = G.dkp + 8, ldc = C + 8;
  for (int e = threadIdx.x; e < G.dkp * ldt; e += blockDim.x) DHf[e] = 0.f;
  const int64_t L_b = G.length(b), chunks = (L_b + C - 1) / C;
  GateRow cur = fetch_gate_row<C>(G, g, beta, b, h, chunks - 1);
  for (int64_t c = chunks - 1; c >= 0; --c) {
    const int64_t bhc = (b * G.nv + h) * G.chunks + c, row0 = b * G.seq + c * C;
    const int64_t qk_row = (row0 * G.nk + G.k_head(h)) * G.dk;
    load_tile(Q, ldk, s.qn + qk_row, G.nk * G.dk, C, G.dkp, cur.n, G.dk);
    load_tile(K, ldk, s.kn + qk_row, G.nk * G.dk, C, G.dkp, cur.n, G.dk);
    load_tile(dOt, ldt, d_o + row0 * G.nv * G.dv + h * G.dv + j0, G.nv * G.dv, C, BV, cur.n, nc);
    load_tile(Wt, ldk, s.w + bhc * C * G.dk, G.dk, C, G.dkp, C, G.dk);
    load_tile(Pt, ldc, s.p + bhc * C * C, C, C, C, C, C);
    chunk_gates(q, cur);
    if (c > 0) cur = fetch_gate_row<C>(G, g, beta, b, h, c - 1);  // in flight over this chunk
    store_tile(s.dh + bhc * G.dk * G.dv + j0, G.dv, DHf, ldt, static_cast<int>(G.dk), nc);
    load_tile(DHt, ldt, DHf, ldt, G.dkp, BV, G.dkp, BV);
    barrier();
    block_mm<false, false>(Cf, ldt, K, ldk, DHt, ldt, C, BV, G.dkp, false);
    for (int e = threadIdx.x; e < C * BV; e += blockDim.x) Cf[e / BV * ldt + e % BV] *= q.e[e / BV];
    barrier();
    block_mm<true, false>(Cf, ldt, Pt, ldc, dOt, ldt, C, BV, C, true);  // dV' = (e ⊙ K̂)·dS + Pᵀ·dO
    for (int e = threadIdx.x; e < C * BV; e += blockDim.x) {
      const int r = e / BV, j = e % BV;
      dVt[r * ldt + j] = from_f32<T>(-Cf[r * ldt + j]);                 // −dV' for the update
      dOt[r * ldt + j] = from_f32<T>(q.Gam[r] * to_f32(dOt[r * ldt + j]));  // Γ ⊙ dO for the update
    }
    store_tile(s.dvn + bhc * C * G.dv + j0, G.dv, Cf, ldt, C, nc);
    for (int e = threadIdx.x; e < G.dkp * BV; e += blockDim.x) DHf[e / BV * ldt + e % BV] *= q.Gam_last;
    barrier();
    block_mm<true, false>(DHf, ldt, Q, ldk, dOt, ldt, G.dkp, BV, C, true);
    block_mm<true, false>(DHf, ldt, Wt, ldk, dVt, ldt, G.dkp, BV, C, true);
    if (!q.carries)
      for (int e = threadIdx.x; e < G.dkp * ldt; e += blockDim.x) DHf[e] = 0.f;
  }
}

template <typename T>
struct ChunkGradSmem {
  // Both phases: the gates, dgam, ys, db and red (small), K̂, dV' (then dX_U), f (fp32: the scores, then the
  // products into dq̂ and dk̂, then dk̂'s sum) and dW. The first phase (through the output and the state) and the
  // second (through the WY representation) share the rest: dov, vn, ht, q, pt (in the order they are done with),
  // then tt, ru, uu, rw, cu, et. early: tt lies within dov and ru, uu, rw before q, so that they can be copied in
  // as soon as the first phase is done with what they cover.
  int gates, small, k, dvn, f, xw, dov, vn, ht, q, pt, tt, ru, uu, rw, cu, et, bytes;
  bool early;
  ChunkGradSmem(const Geo& G) {
    constexpr int C = chunk_of<T>;
    const int64_t ldk = G.dkp + 8, ldv = G.dvp + 8, ldc = C + 8, scores = 2 * C * ldc;
    Carve c;
    gates = c.take(sizeof(Gates<C>));
    small = c.take((3 * C + grad_threads / 32) * 4);
    k = c.take(C * ldk * sizeof(T));
    dvn = c.take(C * ldv * sizeof(T));
    f = c.take((scores > C * ldk ? scores : C * ldk) * 4);
    xw = c.take(C * ldk * sizeof(T));
    Carve one = c, two = c;
    dov = one.take(C * ldv * sizeof(T));
    vn = one.take(C * ldv * sizeof(T));
    ht = one.take(G.dkp * ldv * sizeof(T));
    q = one.take(C * ldk * sizeof(T));
    pt = one.take(C * ldc * sizeof(T));
    tt = two.take(C * ldc * sizeof(T));
    ru = two.take(C * ldv * sizeof(T));
    uu = two.take(C * ldv * sizeof(T));
    rw = two.take(C * ldk * sizeof(T));
    const int64_t cu_floats = scores > C * (ldk > ldv ? ldk : ldv) ? scores : C * (ldk > ldv ? ldk : ldv);
    cu = two.take(cu_floats * 4);
    et = two.take(C * ldc * sizeof(T));
    bytes = one.bytes > two.bytes ? one.bytes : two.bytes;
    early = ru <= vn && cu <= q;  // tt ends where ru starts
  }
};

// Per (sequence, v head, chunk), the chunk's gradients. First through the output and the state: dq̂ = (Γ ⊙ dO)·Sᵀ
// + (dP ⊙ D)·K̂ with dP = dO·V'ᵀ (s ≤ r), dW = −dV'·Sᵀ, dk̂ = e ⊙ (V'·dSᵀ) + (dP ⊙ D)ᵀ·Q̂ (dS: the gradient of the
// state leaving the chunk) and their parts of γ's gradient; then through the WY representation: dX_U = Tᵀ·dV',
// dX_W = Tᵀ·dW, dA = −(dX_U·Uᵀ + dX_W·Wᵀ), giving dv, dβ and dg (γ's gradient summed to each segment's end) and the
// rest of dk̂. The first phase's tiles but dS are copied in while the gates are computed, dS replaces S once dW is
// done; the second phase's tiles are copied over the first's as soon as it is done with what they cover.
template <typename T>
__global__ void __launch_bounds__(grad_threads)
    chunk_grad_kernel(T* d_qkv, float* dg, float* dbeta, Bufs<T> s, const T* d_o, const T* qkv, const float* g,
                      const float* beta, Geo G, ChunkGradSmem<T> L) {
  constexpr int C = chunk_of<T>;
  extern __shared__ __align__(128) unsigned char smem[];
  const int64_t bhc = blockIdx.x, c = bhc % G.chunks, h = bhc / G.chunks % G.nv, b = bhc / G.chunks / G.nv;
  const GateRow f = fetch_gate_row<C>(G, g, beta, b, h, c);
  if (f.n == 0) return;
  T *K = at<T>(smem, L.k), *dVn = at<T>(smem, L.dvn), *XW = at<T>(smem, L.xw);
  float *F = at<float>(smem, L.f), *dgam = at<float>(smem, L.small), *ys = dgam + C, *db = dgam + 2 * C,
        *red = dgam + 3 * C;
  const int ldk = G.dkp + 8, ldv = G.dvp + 8, ldc = C + 8, warp = threadIdx.x / 32, lane = threadIdx.x % 32,
            warps = static_cast<int>(blockDim.x / 32);
  const int64_t row0 = b * G.seq + c * C, qk_row = (row0 * G.nk + G.k_head(h)) * G.dk;
  Gates<C>& q = *at<Gates<C>>(smem, L.gates);
  T *Tt = at<T>(smem, L.tt), *RU = at<T>(smem, L.ru), *Uu = at<T>(smem, L.uu), *RW = at<T>(smem, L.rw),
    *Et = at<T>(smem, L.et);
  const auto load_t = [&] { load_tile(Tt, ldc, s.tm + bhc * C * C, C, C, C, C, C); };
  const auto load_vuw = [&] {
    load_tile(RU, ldv, qkv + row0 * G.row + 2 * G.nk * G.dk + h * G.dv, G.row, C, G.dvp, f.n, G.dv);
    load_tile(Uu, ldv, s.u + bhc * C * G.dv, G.dv, C, G.dvp, C, G.dv);
    load_tile(RW, ldk, s.w + bhc * C * G.dk, G.dk, C, G.dkp, C, G.dk);
  };
  {  // Through the output and the state.
    T *Q = at<T>(smem, L.q), *dOV = at<T>(smem, L.dov), *Vn = at<T>(smem, L.vn), *Ht = at<T>(smem, L.ht),
      *Pt = at<T>(smem, L.pt);
    float *S1 = F, *S2 = F + C * ldc;
    load_tile(Q, ldk, s.qn + qk_row, G.nk * G.dk, C, G.dkp, f.n, G.dk);
    load_tile(K, ldk, s.kn + qk_row, G.nk * G.dk, C, G.dkp, f.n, G.dk);
    load_tile(dOV, ldv, d_o + row0 * G.nv * G.dv + h * G.dv, G.nv * G.dv, C, G.dvp, f.n, G.dv);
    load_tile(Vn, ldv, s.vn + bhc * C * G.dv, G.dv, C, G.dvp, C, G.dv);
    load_tile(dVn, ldv, s.dvn + bhc * C * G.dv, G.dv, C, G.dvp, C, G.dv);
    load_tile(Ht, ldv, s.h + bhc * G.dk * G.dv, G.dv, G.dkp, G.dvp, static_cast<int>(G.dk), G.dv);
    chunk_gates(q, f);
    barrier();
    block_mm<false, true>(S1, ldc, dOV, ldv, Vn, ldv, C, C, G.dvp, false);
    block_mm<false, true>(S2, ldc, Q, ldk, K, ldk, C, C, G.dkp, false);
    for (int e = threadIdx.x; e < C * C; e += blockDim.x) {
      const int r = e / C, t = e % C;
      const float d = t <= r ? q.D(r, t) : 0.f;
      Pt[r * ldc + t] = from_f32<T>(S1[r * ldc + t] * d);
      S2[r * ldc + t] = S1[r * ldc + t] * S2[r * ldc + t] * d;
    }
    barrier();
    for (int r = warp; r < C; r += warps) {
      float acc = 0.f;
      for (int t = lane; t < C; t += 32) acc += S2[r * ldc + t] - S2[t * ldc + r];
      acc = warp_sum(acc);
      if (lane == 0) dgam[r] = acc;
    }
    scale_rows(dOV, ldv, C, G.dvp, q.Gam);
    barrier();
    block_mm<false, true>(F, ldk, dOV, ldv, Ht, ldv, C, G.dkp, G.dvp, false);
    if (L.early) load_t();  // over dO
    for (int r = warp; r < C; r += warps) {
      float acc = 0.f;
      for (int i = lane; i < G.dkp; i += 32) acc += to_f32(Q[r * ldk + i]) * F[r * ldk + i];
      acc = warp_sum(acc);
      if (lane == 0) dgam[r] += acc;
    }
    barrier();
    block_mm<false, false>(F, ldk, Pt, ldc, K, ldk, C, G.dkp, C, true);
    store_tile(s.dq_part + (row0 * G.nv + h) * G.dk, G.nv * G.dk, F, ldk, q.n, G.dk);
    barrier();
    block_mm<false, true>(F, ldk, dVn, ldv, Ht, ldv, C, G.dkp, G.dvp, false);
    for (int e = threadIdx.x; e < C * G.dkp; e += blockDim.x) {  // dW
      const int r = e / G.dkp, i = e % G.dkp;
      XW[r * ldk + i] = from_f32<T>(-F[r * ldk + i]);
    }
    barrier();
    // Ht: S → dS, and Σ S ⊙ dS on the way.
    const float hs = block_total(
        load_tile_dot(Ht, ldv, s.dh + bhc * G.dk * G.dv, G.dv, G.dkp, G.dvp, static_cast<int>(G.dk), G.dv), red);
    block_mm<false, true>(F, ldk, Vn, ldv, Ht, ldv, C, G.dkp, G.dvp, false);
    if (L.early) load_vuw();  // over V' and dS
    for (int r = warp; r < C; r += warps) {
      float y = 0.f;
      for (int i = lane; i < G.dkp; i += 32) {
        y += to_f32(K[r * ldk + i]) * F[r * ldk + i];
        F[r * ldk + i] *= q.e[r];
      }
      y = q.e[r] * warp_sum(y);
      if (lane == 0) {
        dgam[r] -= y;
        ys[r] = y;
      }
    }
    barrier();
    if (warp == 0) {
      float y_sum = 0.f;
      for (int r = lane; r < C; r += 32) y_sum += ys[r];
      y_sum = warp_sum(y_sum);
      if (lane == 0) dgam[q.n - 1] += y_sum + q.Gam_last * hs;
    }
    block_mm<true, false>(F, ldk, Pt, ldc, Q, ldk, C, G.dkp, C, true);  // F: dk̂'s part so far
  }
  // Through the WY representation, over the first phase's tiles.
  float *Cu = at<float>(smem, L.cu), *S1 = Cu, *S2 = Cu + C * ldc;
  if (!L.early) {
    load_t();
    load_vuw();
  }
  barrier();
  block_mm<true, false>(Cu, ldv, Tt, ldc, dVn, ldv, C, G.dvp, C, false);
  for (int r = warp; r < C; r += warps) {
    float acc = 0.f;
    for (int j = lane; j < G.dvp; j += 32) acc += Cu[r * ldv + j] * to_f32(RU[r * ldv + j]);
    acc = warp_sum(acc);
    if (lane == 0) db[r] = acc;
    if (r < q.n) {
      T* dv = d_qkv + (row0 + r) * G.row + 2 * G.nk * G.dk + h * G.dv;
      for (int j = lane; j < G.dv; j += 32) dv[j] = from_f32<T>(q.beta[r] * Cu[r * ldv + j]);
    }
  }
  barrier();
  load_tile(dVn, ldv, Cu, ldv, C, G.dvp, C, G.dvp);  // dX_U
  barrier();
  block_mm<true, false>(Cu, ldk, Tt, ldc, XW, ldk, C, G.dkp, C, false);
  for (int r = warp; r < C; r += warps) {
    const float bg = q.beta[r] * q.Gam[r];
    float xk = 0.f;
    for (int i = lane; i < G.dkp; i += 32) {
      xk += Cu[r * ldk + i] * to_f32(K[r * ldk + i]);
      XW[r * ldk + i] = from_f32<T>(Cu[r * ldk + i]);  // dX_W
      F[r * ldk + i] += bg * Cu[r * ldk + i];
    }
    xk = warp_sum(xk);
    if (lane == 0) {
      db[r] += q.Gam[r] * xk;
      dgam[r] = bg * xk + dgam[r];
    }
  }
  barrier();
  block_mm<false, true>(S1, ldc, dVn, ldv, Uu, ldv, C, C, G.dvp, false);
  block_mm<false, true>(S1, ldc, XW, ldk, RW, ldk, C, C, G.dkp, true);
  block_mm<false, true>(S2, ldc, K, ldk, K, ldk, C, C, G.dkp, false);
  for (int e = threadIdx.x; e < C * C; e += blockDim.x) {
    const int r = e / C, t = e % C;
    const float d = t < r ? q.D(r, t) : 0.f, da = -S1[r * ldc + t];
    S1[r * ldc + t] = da * S2[r * ldc + t] * d;
    Et[r * ldc + t] = from_f32<T>(da * q.beta[r] * d);
  }
  barrier();
  for (int r = warp; r < C; r += warps) {
    float rs = 0.f, cs = 0.f;
    for (int t = lane; t < C; t += 32) {
      rs += S1[r * ldc + t];
      cs += q.beta[t] * S1[t * ldc + r];
    }
    rs = warp_sum(rs);
    cs = warp_sum(cs);
    if (lane == 0) {
      db[r] += rs;
      dgam[r] += q.beta[r] * rs - cs;
    }
  }
  block_mm<false, false>(F, ldk, Et, ldc, K, ldk, C, G.dkp, C, true);
  block_mm<true, false>(F, ldk, Et, ldc, K, ldk, C, G.dkp, C, true);
  store_tile(s.dk_part + (row0 * G.nv + h) * G.dk, G.nv * G.dk, F, ldk, q.n, G.dk);
  // dg: γ's gradient summed from each row to its segment's end, a segmented scan from the last row in warp 0 (each
  // lane C/32 consecutive rows, then across the lanes from the last in a fixed order).
  if (warp == 0) {
    constexpr int R = C / 32;
    float x[R];
    bool reset[R];
    float run = 0.f;
    bool any = false;
#pragma unroll
    for (int k = R - 1; k >= 0; --k) {
      const int r = lane * R + k;
      if (r >= q.n - 1 || q.seg[r + 1] != q.seg[r]) {  // the last row of its segment
        run = 0.f;
        any = true;
      }
      run += r < q.n ? dgam[r] : 0.f;
      x[k] = run;
      reset[k] = any;
    }
    float v = run;
    int rs = any ? 1 : 0;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const float pv = __shfl_down_sync(0xffffffffu, v, o);
      const int pr = __shfl_down_sync(0xffffffffu, rs, o);
      if (lane + o < 32) {
        if (!rs) v += pv;
        rs |= pr;
      }
    }
    float after = __shfl_down_sync(0xffffffffu, v, 1);
    if (lane == 31) after = 0.f;
#pragma unroll
    for (int k = 0; k < R; ++k) {
      const int r = lane * R + k;
      if (r < q.n) {
        dg[(row0 + r) * G.nv + h] = reset[k] ? x[k] : after + x[k];
        dbeta[(row0 + r) * G.nv + h] = db[r];
      }
    }
  }
}

constexpr int max_dk_per_lane = kDeltaRuleChunkedMaxHeadDim / 32;

// Per (token, k head), one warp: the k head's v heads' dq̂, dk̂ summed in head order, then back through the
// normalisations into d_qkv's q and k columns; on padding zero in those and in its v heads' v columns (which
// chunk_grad_kernel writes for every other token).
template <typename T>
__global__ void qk_sum_kernel(T* d_qkv, Bufs<T> s, const T* qkv, Geo G, int64_t items) {
  const int64_t item = static_cast<int64_t>(blockIdx.x) * (threads / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (item >= items) return;
  const int64_t row = item / G.nk, kh = item % G.nk, b = row / G.seq, t = row % G.seq, group = G.nv / G.nk;
  if (t >= G.length(b)) {  // padding: no gradient in this k head's q, k columns and its v heads' v columns
    T* out = d_qkv + row * G.row;
    for (int64_t i = lane; i < G.dk; i += 32) {
      out[kh * G.dk + i] = from_f32<T>(0.f);
      out[(G.nk + kh) * G.dk + i] = from_f32<T>(0.f);
    }
    for (int64_t j = lane; j < group * G.dv; j += 32) out[2 * G.nk * G.dk + kh * group * G.dv + j] = from_f32<T>(0.f);
    return;
  }
  float dq[max_dk_per_lane] = {}, dk[max_dk_per_lane] = {}, qv[max_dk_per_lane] = {}, kv[max_dk_per_lane] = {};
  for (int64_t h = kh * group; h < (kh + 1) * group; ++h)
#pragma unroll
    for (int n = 0; n < max_dk_per_lane; ++n) {
      const int64_t i = lane + 32 * n;
      if (i < G.dk) {
        dq[n] += s.dq_part[(row * G.nv + h) * G.dk + i];
        dk[n] += s.dk_part[(row * G.nv + h) * G.dk + i];
      }
    }
  const T* q = qkv + row * G.row + kh * G.dk;
  const T* k = q + G.nk * G.dk;
  float sq = 0.f, sk = 0.f, qdq = 0.f, kdk = 0.f;
#pragma unroll
  for (int n = 0; n < max_dk_per_lane; ++n) {
    const int64_t i = lane + 32 * n;
    if (i < G.dk) {
      qv[n] = to_f32(q[i]);
      kv[n] = to_f32(k[i]);
    }
    sq += qv[n] * qv[n];
    sk += kv[n] * kv[n];
    qdq += qv[n] * dq[n];
    kdk += kv[n] * dk[n];
  }
  sq = warp_sum(sq);
  sk = warp_sum(sk);
  qdq = warp_sum(qdq);
  kdk = warp_sum(kdk);
  const float rq = rsqrtf(sq + 1e-6f), rk = rsqrtf(sk + 1e-6f), scale = rsqrtf(static_cast<float>(G.dk));
  const float cq = qdq * rq * rq * rq, ck = kdk * rk * rk * rk;
  T* dq_out = d_qkv + row * G.row + kh * G.dk;
  T* dk_out = dq_out + G.nk * G.dk;
#pragma unroll
  for (int n = 0; n < max_dk_per_lane; ++n) {
    const int64_t i = lane + 32 * n;
    if (i < G.dk) {
      dq_out[i] = from_f32<T>(scale * (rq * dq[n] - qv[n] * cq));
      dk_out[i] = from_f32<T>(rk * dk[n] - kv[n] * ck);
    }
  }
}

Geo geometry(const DeltaRuleShape& sh, int64_t chunks) {
  return {sh.seq, sh.n_k_heads, sh.n_v_heads, sh.k_head_dim, sh.v_head_dim, sh.row(), chunks,
          padded16(sh.k_head_dim), padded16(sh.v_head_dim), sh.seq_lens, sh.segments};
}

template <typename T>
Bufs<T> carve(char* base, const DeltaRuleChunkedLayout& l, bool backward) {
  const auto f = [&](int64_t off) { return reinterpret_cast<float*>(base + off); };
  const auto e = [&](int64_t off) { return reinterpret_cast<T*>(base + off); };
  Bufs<T> s{e(l.qn), e(l.kn), nullptr, e(l.p), e(l.u), nullptr, e(l.w), nullptr, nullptr, nullptr, nullptr, nullptr};
  if (backward) {
    s.tm = e(l.tm);
    s.vn = e(l.vn);
    s.h = e(l.h);
    s.dh = e(l.dh);
    s.dvn = e(l.dvn);
    s.dq_part = f(l.dq_part);
    s.dk_part = f(l.dk_part);
  }
  return s;
}

void check_shape(const char* op, const DeltaRuleShape& sh) {
  MT_ASSERT(sh.batch >= 0 && sh.seq > 0 && sh.n_k_heads > 0 && sh.n_v_heads % sh.n_k_heads == 0 &&
                sh.k_head_dim > 0 && sh.v_head_dim > 0 && delta_rule_chunked_supports(sh),
            "{}: batch={} seq={} k heads {} v heads {} head dims {}/{} (the chunked kernel takes head dims <= {})", op,
            sh.batch, sh.seq, sh.n_k_heads, sh.n_v_heads, sh.k_head_dim, sh.v_head_dim,
            kDeltaRuleChunkedMaxHeadDim);
}

template <typename K, typename S>
void launch(const char* op, K kernel, unsigned blocks, unsigned block_threads, const S& L, cudaStream_t st,
            auto&&... args) {
  MT_CUDA_CHECK(op, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, L.bytes));
  MT_CUDA_CHECK(op, cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                         cudaSharedmemCarveoutMaxShared));
  kernel<<<blocks, block_threads, static_cast<size_t>(L.bytes), st>>>(args..., L);
  MT_CHECK_LAUNCH(op, "{} blocks, {} bytes of shared memory", blocks, L.bytes);
}

// The forward's stages into s: q̂, k̂, P, T, U, W, then the state recurrence: with o the output, without the states
// entering the chunks and V' (for the backward).
template <typename T>
void forward_states(T* o, const Bufs<T>& s, const T* qkv, const float* g, const float* beta, const DeltaRuleShape& sh,
                    const Geo& G, cudaStream_t st) {
  const int64_t items = sh.batch * sh.seq * G.nk;
  normalize_kernel<T><<<static_cast<unsigned>((items + threads / 32 - 1) / (threads / 32)), threads, 0, st>>>(
      s.qn, s.kn, qkv, G, items);
  MT_CHECK_LAUNCH("gated_delta_rule_chunked normalize", "{} rows", items);
  const auto heads = static_cast<unsigned>(sh.batch * G.nv * G.chunks);
  launch("gated_delta_rule_chunked prep", prep_kernel<T>, heads, threads, PrepSmem<T>(G), st, s, qkv, g, beta, G);
  const auto tiles = static_cast<unsigned>(sh.batch * G.nv * ((G.dvp + state_cols - 1) / state_cols));
  launch("gated_delta_rule_chunked state", state_kernel<T>, tiles, threads, StateSmem<T>(G), st, o, s, g, beta, G);
}

}  // namespace

template <typename T>
void gated_delta_rule_chunked_forward(T* o, const T* qkv, const float* g, const float* beta,
                                      const DeltaRuleShape& shape, cudaStream_t st) {
  check_shape("gated_delta_rule_chunked_forward", shape);
  if (shape.batch == 0) return;
  const DeltaRuleChunkedLayout l = delta_rule_chunked_layout(shape, sizeof(T), false);
  const Geo G = geometry(shape, l.chunks);
  const Scratch<char> scratch("gated_delta_rule_chunked_forward", l.bytes, st);
  const Bufs<T> s = carve<T>(scratch.get(), l, false);
  forward_states(o, s, qkv, g, beta, shape, G, st);
}

template <typename T>
void gated_delta_rule_chunked_backward(T* d_qkv, float* dg, float* dbeta, const T* d_o, const T* qkv, const float* g,
                                       const float* beta, const DeltaRuleShape& shape, cudaStream_t st) {
  check_shape("gated_delta_rule_chunked_backward", shape);
  if (shape.batch == 0) return;
  const int64_t T_ = shape.batch * shape.seq;
  MT_CUDA_CHECK("gated_delta_rule_chunked_backward", cudaMemsetAsync(dg, 0, T_ * shape.n_v_heads * 4, st));
  MT_CUDA_CHECK("gated_delta_rule_chunked_backward", cudaMemsetAsync(dbeta, 0, T_ * shape.n_v_heads * 4, st));
  const DeltaRuleChunkedLayout l = delta_rule_chunked_layout(shape, sizeof(T), true);
  const Geo G = geometry(shape, l.chunks);
  const Scratch<char> scratch("gated_delta_rule_chunked_backward", l.bytes, st);
  const Bufs<T> s = carve<T>(scratch.get(), l, true);
  forward_states(static_cast<T*>(nullptr), s, qkv, g, beta, shape, G, st);
  const auto tiles = static_cast<unsigned>(shape.batch * G.nv * ((G.dvp + state_cols - 1) / state_cols));
  launch("gated_delta_rule_chunked state_grad", state_grad_kernel<T>, tiles, threads, StateGradSmem<T>(G), st, s,
         d_o, g, beta, G);
  const auto heads = static_cast<unsigned>(shape.batch * G.nv * G.chunks);
  launch("gated_delta_rule_chunked chunk_grad", chunk_grad_kernel<T>, heads, grad_threads, ChunkGradSmem<T>(G), st,
         d_qkv, dg, dbeta, s, d_o, qkv, g, beta, G);
  const int64_t items = T_ * G.nk;
  qk_sum_kernel<T><<<static_cast<unsigned>((items + threads / 32 - 1) / (threads / 32)), threads, 0, st>>>(
      d_qkv, s, qkv, G, items);
  MT_CHECK_LAUNCH("gated_delta_rule_chunked qk_sum", "{} rows", items);
}

template void gated_delta_rule_chunked_forward<float>(float*, const float*, const float*, const float*,
                                                      const DeltaRuleShape&, cudaStream_t);
template void gated_delta_rule_chunked_forward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const float*,
                                                              const float*, const DeltaRuleShape&, cudaStream_t);
template void gated_delta_rule_chunked_backward<float>(float*, float*, float*, const float*, const float*,
                                                       const float*, const float*, const DeltaRuleShape&,
                                                       cudaStream_t);
template void gated_delta_rule_chunked_backward<__nv_bfloat16>(__nv_bfloat16*, float*, float*, const __nv_bfloat16*,
                                                               const __nv_bfloat16*, const float*, const float*,
                                                               const DeltaRuleShape&, cudaStream_t);

}  // namespace mt::cuda
