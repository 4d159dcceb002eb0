// Flash attention (FA2-style) forward/backward: causal, GQA, sliding window, right padding, packed segments, logit
// scale, soft-capping (Gemma 2) and ALiBi (Baichuan 2), a value head dim other than the q/k one (multi-head latent
// attention: both padded with zeros to the larger one's bucket) (AttnShape).
// Invariant: S×S never exists; tiles outside the causal/window/length range are never visited; padded rows give 0;
// deterministic (dk/dv and dq by separate kernels, no atomics); bf16 runs mma.sync tensor cores, fp32 FMA loops.
// Soft-cap and ALiBi are compile-time kernel variants (Cap, Alibi): the plain kernels (any scale) are exactly the
// kernels without those options, and only the variants turn scores into final logits before the softmax. Attention
// sinks (GPT-OSS) are a forward variant (Sink) that adds the head's sink logit to each row's softmax denominator at
// the end (lse includes it); the backward kernels need no change for them (kernels/attention/attention_sinks.cu: d_sinks).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int warps = 4, threads = 32 * warps;

struct attn_args {
  int seq, n_heads, hd, group, window;  // hd: q/k head dim; window clamped to <= seq (same visibility); 0 = none
  int64_t q_stride, kv_stride;          // elements per token row of q/dq and of k/dk
  int vd;                               // value head dim (= hd but for latent attention)
  int64_t o_stride, v_stride;           // elements per token row of out/dout and of v/dv
  const int32_t* seq_lens;              // device [batch] or null
  const int32_t* segments;              // device [batch·seq] or null
  float scale;                          // AttnShape::scale, or 1/sqrt(hd) as the CPU reference rounds it
  bool vec;                             // hd and every pointer allow 16-byte global accesses
  // Last, so that the plain kernels read the fields above exactly as before these were added:
  float cap;                            // soft-cap (> 0 in the Cap kernels; 0 = none)
  const float* alibi;                   // device [n_heads] ALiBi slopes (the Alibi kernels) or null
  const void* sinks;                    // device [n_heads] of T: sink logits (the Sink forward kernels) or null
};

// Tiling for element type T and head_dim bucket HD (head_dim padded up to 32, 64, 128 or 256 with zeros).
template <typename T, int HD>
struct cfg {
  static constexpr bool f32 = std::is_same_v<T, float>;
  static constexpr int chunk = vec16<T>;                 // elements per 16-byte copy
  static constexpr int stride = HD + chunk;              // smem row stride: a 16-byte pad spreads rows over banks
  static constexpr int stages = f32 ? 1 : 2;             // streamed tiles double-buffered for bf16
  static constexpr int mb = HD <= 128 ? 2 : 1;           // forward, dq: 16-row blocks per warp
  static constexpr int bq = 16 * mb * warps;             // forward, dq: query rows per block
  static constexpr int bk = HD == 256 ? 32 : 64;         // forward: keys per streamed tile
  static constexpr int bkq = HD >= 64 ? 32 : 64;         // dq: keys per streamed tile
  static constexpr int bkb = 16 * warps;                 // dk/dv: keys per block, 16 per warp
  static constexpr int bqb = HD >= 128 ? 32 : 64;        // dk/dv: queries per streamed tile
  static constexpr int dcols = HD < 128 ? HD : 128;      // backward: output columns per block
  static constexpr float unit = f32 ? 1.f : 1.4426950408889634f;  // scores live in units of ln(e) or ln(2)
  static constexpr int row_bytes = stride * static_cast<int>(sizeof(T));
  // fp32 P staging for mma_pv: per warp [16·rows_mb][cols + 4] floats.
  static constexpr int staging(int cols, int rows_mb) { return f32 ? warps * 16 * rows_mb * (cols + 4) * 4 : 0; }
};

// Byte offsets of the dynamic shared memory of each kernel.
template <typename T, int HD>
struct fwd_layout {
  using C = cfg<T, HD>;
  static constexpr int q = 0, k = q + C::bq * C::row_bytes, v = k + C::stages * C::bk * C::row_bytes;
  static constexpr int p = v + C::stages * C::bk * C::row_bytes, qseg = p + C::staging(C::bk, C::mb);
  static constexpr int kseg = qseg + C::bq * 4, bytes = kseg + C::stages * C::bk * 4;
};

template <typename T, int HD>
struct dq_layout {
  using C = cfg<T, HD>;
  static constexpr int q = 0, dout = q + C::bq * C::row_bytes, k = dout + C::bq * C::row_bytes;
  static constexpr int v = k + C::stages * C::bkq * C::row_bytes, p = v + C::stages * C::bkq * C::row_bytes;
  static constexpr int qseg = p + C::staging(C::bkq, C::mb), kseg = qseg + C::bq * 4;
  static constexpr int bytes = kseg + C::stages * C::bkq * 4;
};

template <typename T, int HD>
struct dkdv_layout {
  using C = cfg<T, HD>;
  static constexpr int k = 0, v = k + C::bkb * C::row_bytes, q = v + C::bkb * C::row_bytes;
  static constexpr int dout = q + C::stages * C::bqb * C::row_bytes, p = dout + C::stages * C::bqb * C::row_bytes;
  static constexpr int lse = p + C::staging(C::bqb, 1), dsum = lse + C::stages * C::bqb * 4;
  static constexpr int kseg = dsum + C::stages * C::bqb * 4, qseg = kseg + C::bkb * 4;
  static constexpr int bytes = qseg + C::stages * C::bqb * 4;
};

template <typename T>
__device__ __forceinline__ float exp_u(float x) {
  if constexpr (std::is_same_v<T, float>) {
    return expf(x);
  } else {
    return exp2f(x);
  }
}

// tanh(x) for the soft-cap: tanhf for fp32 (the reference-precision path); for bf16 1 − 2/(e^{2x} + 1) through exp2
// and a fast divide, absolute error about 1e-7 (far below the bf16 rounding of P), saturating to ±1 for large |x|.
template <typename T>
__device__ __forceinline__ float tanh_u(float x) {
  if constexpr (std::is_same_v<T, float>) {
    return tanhf(x);
  } else {
    return 1.f - __fdividef(2.f, 1.f + exp2f(x * 2.8853900817779268f));  // 2·log2(e)
  }
}

// The variants' map from a raw score s = q·k to its final logit in units of cfg::unit (see AttnShape):
// z = scale·s; where Cap, z = cap·tanh(z/cap) (th = tanh(z/cap) for the backward's 1 − th²); where Alibi,
// z += slope_h·(j − i).
struct logit_map {
  float mul;      // Cap: scale / cap; otherwise scale·unit
  float cap_u;    // Cap: cap·unit
  float slope_u;  // Alibi: slope of the head · unit
};

template <typename T, bool Cap, bool Alibi>
__device__ __forceinline__ float final_logit(float s, int j_minus_i, const logit_map& lm, float& th) {
  float z;
  if constexpr (Cap) {
    th = tanh_u<T>(s * lm.mul);
    z = lm.cap_u * th;
  } else {
    th = 0.f;
    z = s * lm.mul;
  }
  if constexpr (Alibi) z = fmaf(lm.slope_u, static_cast<float>(j_minus_i), z);
  return z;
}

// The map for head h (the slope read from device memory where Alibi).
template <typename T, int HD, bool Cap, bool Alibi>
__device__ __forceinline__ logit_map logit_map_of(const attn_args& a, int h) {
  constexpr float unit = cfg<T, HD>::unit;
  logit_map lm;
  lm.mul = Cap ? a.scale / a.cap : a.scale * unit;
  lm.cap_u = Cap ? a.cap * unit : 0.f;
  lm.slope_u = Alibi ? a.alibi[h] * unit : 0.f;
  return lm;
}

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(pending) : "memory");
}

// Four 8x8 b16 matrices; lanes 8m..8m+7 give the row addresses of matrix m; register m of lane l holds row l/4,
// columns 2(l%4), 2(l%4)+1 of matrix m (of its transpose with .trans).
// addr is a shared-state-space byte address (smem_addr).
__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void ldsm_x4_t(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// c (16x8 fp32) += a (16x16 bf16, row) · b (16x8 bf16, col).
__device__ __forceinline__ void mma_bf16(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const unsigned*>(&v);
}

// Accumulator layout of a warp's 16·MB-row tile (as mma.sync m16n8 leaves it): c[mb][n][e] is row
// 16·mb + g + 8·(e/2), column 8n + 2·t + e%2, with g = lane/4 and t = lane%4.

// c[mb][n] += A[16·MB][HD] · B[8·NT][HD]ᵀ for row-major A, B in smem (row stride cfg::stride).
template <typename T, int HD, int MB, int NT>
__device__ __forceinline__ void mma_abt(float (&c)[MB][NT][4], const T* a_s, const T* b_s) {
  constexpr int ST = cfg<T, HD>::stride;
  const int lane = threadIdx.x % 32;
  if constexpr (std::is_same_v<T, float>) {
    const int g = lane / 4, t = lane % 4;
#pragma unroll 2
    for (int d = 0; d < HD; ++d) {
      float a0[MB], a1[MB];
#pragma unroll
      for (int mb = 0; mb < MB; ++mb) {
        a0[mb] = a_s[(mb * 16 + g) * ST + d];
        a1[mb] = a_s[(mb * 16 + g + 8) * ST + d];
      }
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        const float b0 = b_s[(n * 8 + 2 * t) * ST + d], b1 = b_s[(n * 8 + 2 * t + 1) * ST + d];
#pragma unroll
        for (int mb = 0; mb < MB; ++mb) {
          c[mb][n][0] += a0[mb] * b0;
          c[mb][n][1] += a0[mb] * b1;
          c[mb][n][2] += a1[mb] * b0;
          c[mb][n][3] += a1[mb] * b1;
        }
      }
    }
  } else {
    static_assert(NT % 2 == 0);
    constexpr int E = sizeof(T);
    const unsigned a_base = smem_addr(a_s + (lane % 16) * ST + (lane / 16) * 8);
    const unsigned b_base = smem_addr(b_s + (lane % 8 + (lane / 16) * 8) * ST + ((lane / 8) % 2) * 8);
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      unsigned a[MB][4];
#pragma unroll
      for (int mb = 0; mb < MB; ++mb) ldsm_x4(a[mb], a_base + (mb * 16 * ST + kk * 16) * E);
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        unsigned b[4];  // b[0], b[1]: columns 16np..16np+7; b[2], b[3]: columns 16np+8..16np+15
        ldsm_x4(b, b_base + (np * 16 * ST + kk * 16) * E);
#pragma unroll
        for (int mb = 0; mb < MB; ++mb) {
          mma_bf16(c[mb][2 * np], a[mb], b[0], b[1]);
          mma_bf16(c[mb][2 * np + 1], a[mb], b[2], b[3]);
        }
      }
    }
  }
}

// Two independent products in one pass, c += A·Bᵀ and c2 += A2·B2ᵀ (as mma_abt): twice the MMAs in flight.
template <typename T, int HD, int MB, int NT>
__device__ __forceinline__ void mma_abt2(float (&c)[MB][NT][4], const T* a_s, const T* b_s, float (&c2)[MB][NT][4],
                                         const T* a2_s, const T* b2_s) {
  if constexpr (std::is_same_v<T, float>) {
    mma_abt<T, HD, MB, NT>(c, a_s, b_s);
    mma_abt<T, HD, MB, NT>(c2, a2_s, b2_s);
  } else {
    static_assert(NT % 2 == 0);
    constexpr int ST = cfg<T, HD>::stride, E = sizeof(T);
    const int lane = threadIdx.x % 32;
    const int a_off = (lane % 16) * ST + (lane / 16) * 8, b_off = (lane % 8 + (lane / 16) * 8) * ST + ((lane / 8) % 2) * 8;
    const unsigned a_base = smem_addr(a_s + a_off), b_base = smem_addr(b_s + b_off);
    const unsigned a2_base = smem_addr(a2_s + a_off), b2_base = smem_addr(b2_s + b_off);
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      unsigned a[MB][4], a2[MB][4];
#pragma unroll
      for (int mb = 0; mb < MB; ++mb) {
        ldsm_x4(a[mb], a_base + (mb * 16 * ST + kk * 16) * E);
        ldsm_x4(a2[mb], a2_base + (mb * 16 * ST + kk * 16) * E);
      }
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        unsigned b[4], b2[4];
        ldsm_x4(b, b_base + (np * 16 * ST + kk * 16) * E);
        ldsm_x4(b2, b2_base + (np * 16 * ST + kk * 16) * E);
#pragma unroll
        for (int mb = 0; mb < MB; ++mb) {
          mma_bf16(c[mb][2 * np], a[mb], b[0], b[1]);
          mma_bf16(c2[mb][2 * np], a2[mb], b2[0], b2[1]);
          mma_bf16(c[mb][2 * np + 1], a[mb], b[2], b[3]);
          mma_bf16(c2[mb][2 * np + 1], a2[mb], b2[2], b2[3]);
        }
      }
    }
  }
}

// o[mb][n] += P[16·MB][16·KT] · B[16·KT][8·DT], P in accumulator layout (p[MB][2KT][4]), B row-major in smem
// (cfg::stride); bf16 rounds P to bf16 and feeds it from registers; fp32 stages P through the warp's `staging`
// [16·MB][16·KT + 4].
template <typename T, int HD, int MB, int KT, int DT>
__device__ __forceinline__ void mma_pv(float (&o)[MB][DT][4], const float (&p)[MB][2 * KT][4], const T* b_s,
                                       float* staging) {
  constexpr int ST = cfg<T, HD>::stride;
  const int lane = threadIdx.x % 32;
  if constexpr (std::is_same_v<T, float>) {
    constexpr int SS = 16 * KT + 4;
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int mb = 0; mb < MB; ++mb) {
#pragma unroll
      for (int n = 0; n < 2 * KT; ++n) {
        float* lo = staging + (mb * 16 + g) * SS + n * 8 + 2 * t;
        lo[0] = p[mb][n][0];
        lo[1] = p[mb][n][1];
        lo[8 * SS] = p[mb][n][2];
        lo[8 * SS + 1] = p[mb][n][3];
      }
    }
    __syncwarp();
#pragma unroll 2
    for (int kx = 0; kx < 16 * KT; ++kx) {
      float p0[MB], p1[MB];
#pragma unroll
      for (int mb = 0; mb < MB; ++mb) {
        p0[mb] = staging[(mb * 16 + g) * SS + kx];
        p1[mb] = staging[(mb * 16 + g + 8) * SS + kx];
      }
#pragma unroll
      for (int n = 0; n < DT; ++n) {
        const float b0 = b_s[kx * ST + n * 8 + 2 * t], b1 = b_s[kx * ST + n * 8 + 2 * t + 1];
#pragma unroll
        for (int mb = 0; mb < MB; ++mb) {
          o[mb][n][0] += p0[mb] * b0;
          o[mb][n][1] += p0[mb] * b1;
          o[mb][n][2] += p1[mb] * b0;
          o[mb][n][3] += p1[mb] * b1;
        }
      }
    }
    __syncwarp();
  } else {
    static_assert(DT % 2 == 0);
    constexpr int E = sizeof(T);
    const unsigned b_base = smem_addr(b_s + (lane % 16) * ST + (lane / 16) * 8);
#pragma unroll
    for (int kk = 0; kk < KT; ++kk) {
      unsigned a[MB][4];
#pragma unroll
      for (int mb = 0; mb < MB; ++mb) {
        a[mb][0] = pack_bf16(p[mb][2 * kk][0], p[mb][2 * kk][1]);
        a[mb][1] = pack_bf16(p[mb][2 * kk][2], p[mb][2 * kk][3]);
        a[mb][2] = pack_bf16(p[mb][2 * kk + 1][0], p[mb][2 * kk + 1][1]);
        a[mb][3] = pack_bf16(p[mb][2 * kk + 1][2], p[mb][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < DT / 2; ++dp) {
        unsigned b[4];  // b[0], b[1]: columns 16dp..16dp+7; b[2], b[3]: columns 16dp+8..16dp+15
        ldsm_x4_t(b, b_base + (kk * 16 * ST + dp * 16) * E);
#pragma unroll
        for (int mb = 0; mb < MB; ++mb) {
          mma_bf16(o[mb][2 * dp], a[mb], b[0], b[1]);
          mma_bf16(o[mb][2 * dp + 1], a[mb], b[2], b[3]);
        }
      }
    }
  }
}

// Rows [0, ROWS) of a tile into smem [ROWS][stride]: row r < n_valid from src + r·src_stride (cols columns: a.hd
// for q/k, a.vd for v/dout), zeros elsewhere (rows >= n_valid, columns cols..HD). 16-byte cp.async when a.vec,
// element copies otherwise.
template <typename T, int ROWS, int HD>
__device__ __forceinline__ void load_tile(T* dst, const T* src, int64_t src_stride, int n_valid, const attn_args& a,
                                          int cols) {
  using C = cfg<T, HD>;
  constexpr int per_row = HD / C::chunk;
  for (int idx = threadIdx.x; idx < ROWS * per_row; idx += threads) {
    const int r = idx / per_row, c = (idx % per_row) * C::chunk;
    T* d = dst + r * C::stride + c;
    if (r < n_valid && c < cols) {
      const T* s = src + r * src_stride + c;
      if (a.vec) {
        cp_async16(d, s);
      } else {
#pragma unroll
        for (int e = 0; e < C::chunk; ++e) d[e] = c + e < cols ? s[e] : from_f32<T>(0.f);
      }
    } else {
      *reinterpret_cast<uint4*>(d) = make_uint4(0u, 0u, 0u, 0u);
    }
  }
}

// dst[r] = segment id of token tok + r for r < n_valid, else 0 (0 everywhere without segments), r < rows.
__device__ __forceinline__ void load_segments(int* dst, const attn_args& a, int64_t tok, int rows, int n_valid) {
  for (int r = threadIdx.x; r < rows; r += threads) {
    dst[r] = a.segments != nullptr && r < n_valid ? a.segments[tok + r] : 0;
  }
}

__device__ __forceinline__ int valid_len(const attn_args& a, int b) {
  return a.seq_lens != nullptr ? min(max(a.seq_lens[b], 0), a.seq) : a.seq;
}

// AttnShape's rule: key j is visible to query i iff j <= i < len_b, i − j < window (when set) and both carry the same
// segment id; rows i >= len_b get out 0, lse 0 and zero gradients.
__device__ __forceinline__ bool visible(const attn_args& a, int i, int j, int len, int seg_i, int seg_j) {
  return j <= i && i < len && (a.window == 0 || i - j < a.window) && seg_i == seg_j;
}

// Whether some pair of queries [q0, q0+nq) × keys [k0, k0+nk) may be invisible: a key after a query, a pair beyond
// the window, query rows at or past len, or segments. Otherwise the tile needs no mask.
__device__ __forceinline__ bool needs_mask(const attn_args& a, int q0, int nq, int k0, int nk, int len) {
  return k0 + nk - 1 > q0 || (a.window > 0 && q0 + nq - 1 - k0 >= a.window) || q0 + nq > len ||
         a.segments != nullptr;
}

// Zeros rows [0, rows) × columns [0, cols) at base (row stride in elements).
template <typename T>
__device__ void zero_rows(T* base, int64_t row_stride, int rows, int cols) {
  for (int idx = threadIdx.x; idx < rows * cols; idx += threads) {
    base[static_cast<int64_t>(idx / cols) * row_stride + idx % cols] = from_f32<T>(0.f);
  }
}

// row[d], row[d+1] = x0, x1 for the columns below hd.
template <typename T>
__device__ __forceinline__ void store_pair(T* row, int d, float x0, float x1, int hd, bool vec) {
  if (vec) {  // hd is a multiple of the 16-byte chunk, so d < hd implies d + 1 < hd
    if (d < hd) {
      Pack<T, 2> pk;
      pk.v[0] = from_f32<T>(x0);
      pk.v[1] = from_f32<T>(x1);
      *reinterpret_cast<Pack<T, 2>*>(row + d) = pk;
    }
  } else {
    if (d < hd) row[d] = from_f32<T>(x0);
    if (d + 1 < hd) row[d + 1] = from_f32<T>(x1);
  }
}

// Block (query tile, head, batch); warp w owns query rows [16·mb·w, 16·mb·(w+1)) of the tile; K/V tiles stream
// through smem. Plain: scores stay raw until the softmax, which works in units of cfg::unit (exp or exp2); Cap / Alibi:
// each tile's scores become final logits (units of cfg::unit) first, and the softmax takes them as they are.
template <typename T, int HD, bool Cap, bool Alibi, bool Sink>
__global__ void __launch_bounds__(threads)
    attn_forward_kernel(T* out, float* lse, const T* q, const T* k, const T* v, const attn_args a) {
  constexpr bool logits = Cap || Alibi;
  using C = cfg<T, HD>;
  using L = fwd_layout<T, HD>;
  constexpr int MB = C::mb, BQ = C::bq, BK = C::bk, ST = C::stride;
  extern __shared__ __align__(16) unsigned char smem[];
  T* q_s = reinterpret_cast<T*>(smem + L::q);
  T* k_s = reinterpret_cast<T*>(smem + L::k);
  T* v_s = reinterpret_cast<T*>(smem + L::v);
  float* p_s = reinterpret_cast<float*>(smem + L::p);
  int* qseg_s = reinterpret_cast<int*>(smem + L::qseg);
  int* kseg_s = reinterpret_cast<int*>(smem + L::kseg);

  const int h = blockIdx.x % a.n_heads, b = blockIdx.x / a.n_heads;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * BQ;  // heaviest (latest) tiles are dispatched first
  const int len = valid_len(a, b);
  const int64_t tok0 = static_cast<int64_t>(b) * a.seq, lse0 = (static_cast<int64_t>(b) * a.n_heads + h) * a.seq;
  T* out_h = out + static_cast<int64_t>(h) * a.vd;
  if (q0 >= len) {
    const int rows = min(BQ, a.seq - q0);
    zero_rows(out_h + (tok0 + q0) * a.o_stride, a.o_stride, rows, a.vd);
    for (int r = threadIdx.x; r < rows; r += threads) lse[lse0 + q0 + r] = 0.f;
    return;
  }
  const int q_end = min(q0 + BQ, len);
  const int kt0 = (a.window > 0 ? max(0, q0 - a.window + 1) : 0) / BK, n_tiles = (q_end - 1) / BK - kt0 + 1;
  const int64_t kv_off = static_cast<int64_t>(h / a.group) * a.hd, v_off = static_cast<int64_t>(h / a.group) * a.vd;

  load_tile<T, BQ, HD>(q_s, q + (tok0 + q0) * a.q_stride + static_cast<int64_t>(h) * a.hd, a.q_stride, q_end - q0, a,
                       a.hd);
  load_segments(qseg_s, a, tok0 + q0, BQ, q_end - q0);
  auto load_kv = [&](int it, int buf) {
    const int k0 = (kt0 + it) * BK, n_valid = min(BK, len - k0);
    load_tile<T, BK, HD>(k_s + buf * BK * ST, k + (tok0 + k0) * a.kv_stride + kv_off, a.kv_stride, n_valid, a, a.hd);
    load_tile<T, BK, HD>(v_s + buf * BK * ST, v + (tok0 + k0) * a.v_stride + v_off, a.v_stride, n_valid, a, a.vd);
    load_segments(kseg_s + buf * BK, a, tok0 + k0, BK, n_valid);
  };
  load_kv(0, 0);
  cp_async_commit();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, t4 = lane % 4;
  const int wr = warp * 16 * MB + lane / 4;  // this thread's tile rows: wr + 16·mb + 8·hr
  const float sc = logits ? 1.f : a.scale * C::unit;
  [[maybe_unused]] logit_map lm;
  if constexpr (logits) lm = logit_map_of<T, HD, Cap, Alibi>(a, h);
  float o[MB][HD / 8][4] = {};
  float m[MB][2], l[MB][2];  // running max (units of cfg::unit) and this thread's share of Σ p
#pragma unroll
  for (int mb = 0; mb < MB; ++mb) {
    m[mb][0] = m[mb][1] = -INFINITY;
    l[mb][0] = l[mb][1] = 0.f;
  }

  for (int it = 0; it < n_tiles; ++it) {
    const int buf = it % C::stages;
    if (C::stages > 1 && it + 1 < n_tiles) {
      load_kv(it + 1, (it + 1) % C::stages);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int k0 = (kt0 + it) * BK;
    const int* kseg = kseg_s + buf * BK;
    float s[MB][BK / 8][4] = {};
    mma_abt<T, HD, MB, BK / 8>(s, q_s + warp * 16 * MB * ST, k_s + buf * BK * ST);
    if constexpr (logits) {
#pragma unroll
      for (int mb = 0; mb < MB; ++mb) {
#pragma unroll
        for (int n = 0; n < BK / 8; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int r = wr + mb * 16 + (e / 2) * 8, c = n * 8 + 2 * t4 + e % 2;
            float th;
            s[mb][n][e] = final_logit<T, Cap, Alibi>(s[mb][n][e], k0 + c - (q0 + r), lm, th);
          }
        }
      }
    }
    if (needs_mask(a, q0, BQ, k0, BK, len)) {
#pragma unroll
      for (int mb = 0; mb < MB; ++mb) {
#pragma unroll
        for (int n = 0; n < BK / 8; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int r = wr + mb * 16 + (e / 2) * 8, c = n * 8 + 2 * t4 + e % 2;
            if (!visible(a, q0 + r, k0 + c, len, qseg_s[r], kseg[c])) s[mb][n][e] = -INFINITY;
          }
        }
      }
    }
#pragma unroll
    for (int mb = 0; mb < MB; ++mb) {
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        float mx = -INFINITY;
#pragma unroll
        for (int n = 0; n < BK / 8; ++n) mx = fmaxf(mx, fmaxf(s[mb][n][2 * hr], s[mb][n][2 * hr + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m[mb][hr], mx * sc);      // rounding is monotone: max(s)·sc = max(s·sc)
        const float base = m_new == -INFINITY ? 0.f : m_new;  // a row with nothing visible yet keeps p = 0
        const float corr = exp_u<T>(m[mb][hr] - base);
        m[mb][hr] = m_new;
        float sum = 0.f;
#pragma unroll
        for (int n = 0; n < BK / 8; ++n) {
          s[mb][n][2 * hr] = exp_u<T>(fmaf(s[mb][n][2 * hr], sc, -base));
          s[mb][n][2 * hr + 1] = exp_u<T>(fmaf(s[mb][n][2 * hr + 1], sc, -base));
          sum += s[mb][n][2 * hr] + s[mb][n][2 * hr + 1];
        }
        l[mb][hr] = l[mb][hr] * corr + sum;
#pragma unroll
        for (int n = 0; n < HD / 8; ++n) {
          o[mb][n][2 * hr] *= corr;
          o[mb][n][2 * hr + 1] *= corr;
        }
      }
    }
    mma_pv<T, HD, MB, BK / 16, HD / 8>(o, s, v_s + buf * BK * ST, p_s + warp * 16 * MB * (BK + 4));
    __syncthreads();
    if (C::stages == 1 && it + 1 < n_tiles) {
      load_kv(it + 1, 0);
      cp_async_commit();
    }
  }

#pragma unroll
  for (int mb = 0; mb < MB; ++mb) {
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      float sum = l[mb][hr];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const int i = q0 + wr + mb * 16 + 8 * hr;
      if (i >= a.seq) continue;
      const bool valid = i < len;  // a valid row sees its own key, so the sum is about 1 or more
      float row_m = m[mb][hr];
      if constexpr (Sink) {  // the sink joins the denominator: rescale to max(m, sink), add exp(sink − max)
        const float sink_u = to_f32(static_cast<const T*>(a.sinks)[h]) * C::unit, ms = fmaxf(row_m, sink_u);
        sum = sum * exp_u<T>(row_m - ms) + exp_u<T>(sink_u - ms);
        row_m = ms;
      }
      const float inv = valid ? (Sink ? exp_u<T>(m[mb][hr] - row_m) / sum : 1.f / sum) : 0.f;
      T* row = out_h + (tok0 + i) * a.o_stride;
#pragma unroll
      for (int n = 0; n < HD / 8; ++n) {
        store_pair(row, n * 8 + 2 * t4, valid ? o[mb][n][2 * hr] * inv : 0.f,
                   valid ? o[mb][n][2 * hr + 1] * inv : 0.f, a.vd, a.vec);
      }
      if (t4 == 0) lse[lse0 + i] = valid ? row_m / C::unit + logf(sum) : 0.f;
    }
  }
}

// dsum[b, h, i] = Σ_d dout·out over the row (fp32), 0 for rows i >= len; one warp per (token, head).
template <typename T>
__global__ void attn_dsum_kernel(float* dsum, const T* __restrict__ dout, const T* __restrict__ out, const attn_args a,
                                 int64_t rows) {
  const int lane = threadIdx.x % 32;
  const int64_t warps_total = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t w = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; w < rows; w += warps_total) {
    const int64_t t = w / a.n_heads;
    const int h = static_cast<int>(w % a.n_heads), b = static_cast<int>(t / a.seq), i = static_cast<int>(t % a.seq);
    float acc = 0.f;
    if (i < valid_len(a, b)) {
      const int64_t off = t * a.o_stride + static_cast<int64_t>(h) * a.vd;
      for (int d = lane; d < a.vd; d += 32) acc += to_f32(dout[off + d]) * to_f32(out[off + d]);
    }
    acc = warp_sum(acc);
    if (lane == 0) dsum[(static_cast<int64_t>(b) * a.n_heads + h) * a.seq + i] = acc;
  }
}

// Block (query tile, head, batch · column split): dq for output columns [d0, d0 + dcols); warp w owns query rows
// [16·mb·w, 16·mb·(w+1)); K/V tiles stream through smem; p = exp(s·scale − lse), ds = p·(dp − dsum),
// dq = scale·Σ ds·k. Cap / Alibi: p = exp(z − lse) of the final logit z, and with Cap ds carries 1 − tanh².
template <typename T, int HD, bool Cap, bool Alibi>
__global__ void __launch_bounds__(threads)
    attn_dq_kernel(T* dq, const T* dout, const T* q, const T* k, const T* v, const float* lse, const float* dsum,
                   const attn_args a) {
  constexpr bool logits = Cap || Alibi;
  using C = cfg<T, HD>;
  using L = dq_layout<T, HD>;
  constexpr int MB = C::mb, BQ = C::bq, BK = C::bkq, ST = C::stride, DC = C::dcols, splits = HD / DC;
  extern __shared__ __align__(16) unsigned char smem[];
  T* q_s = reinterpret_cast<T*>(smem + L::q);
  T* do_s = reinterpret_cast<T*>(smem + L::dout);
  T* k_s = reinterpret_cast<T*>(smem + L::k);
  T* v_s = reinterpret_cast<T*>(smem + L::v);
  float* p_s = reinterpret_cast<float*>(smem + L::p);
  int* qseg_s = reinterpret_cast<int*>(smem + L::qseg);
  int* kseg_s = reinterpret_cast<int*>(smem + L::kseg);

  const int d0 = (blockIdx.x % splits) * DC, h = (blockIdx.x / splits) % a.n_heads;
  const int b = blockIdx.x / splits / a.n_heads, q0 = (gridDim.y - 1 - blockIdx.y) * BQ;  // heaviest first
  const int len = valid_len(a, b);
  const int64_t tok0 = static_cast<int64_t>(b) * a.seq, lse0 = (static_cast<int64_t>(b) * a.n_heads + h) * a.seq;
  const int64_t q_off = static_cast<int64_t>(h) * a.hd;
  if (q0 >= len) {
    zero_rows(dq + (tok0 + q0) * a.q_stride + q_off + d0, a.q_stride, min(BQ, a.seq - q0), min(DC, a.hd - d0));
    return;
  }
  const int q_end = min(q0 + BQ, len);
  const int kt0 = (a.window > 0 ? max(0, q0 - a.window + 1) : 0) / BK, n_tiles = (q_end - 1) / BK - kt0 + 1;
  const int64_t kv_off = static_cast<int64_t>(h / a.group) * a.hd, v_off = static_cast<int64_t>(h / a.group) * a.vd;

  load_tile<T, BQ, HD>(q_s, q + (tok0 + q0) * a.q_stride + q_off, a.q_stride, q_end - q0, a, a.hd);
  load_tile<T, BQ, HD>(do_s, dout + (tok0 + q0) * a.o_stride + static_cast<int64_t>(h) * a.vd, a.o_stride, q_end - q0,
                       a, a.vd);
  load_segments(qseg_s, a, tok0 + q0, BQ, q_end - q0);
  auto load_kv = [&](int it, int buf) {
    const int k0 = (kt0 + it) * BK, n_valid = min(BK, len - k0);
    load_tile<T, BK, HD>(k_s + buf * BK * ST, k + (tok0 + k0) * a.kv_stride + kv_off, a.kv_stride, n_valid, a, a.hd);
    load_tile<T, BK, HD>(v_s + buf * BK * ST, v + (tok0 + k0) * a.v_stride + v_off, a.v_stride, n_valid, a, a.vd);
    load_segments(kseg_s + buf * BK, a, tok0 + k0, BK, n_valid);
  };
  load_kv(0, 0);
  cp_async_commit();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, t4 = lane % 4;
  const int wr = warp * 16 * MB + lane / 4;  // this thread's tile rows: wr + 16·mb + 8·hr
  const float sc = a.scale * C::unit;
  [[maybe_unused]] logit_map lm;
  if constexpr (logits) lm = logit_map_of<T, HD, Cap, Alibi>(a, h);
  float row_lse[MB][2], row_dsum[MB][2];
#pragma unroll
  for (int mb = 0; mb < MB; ++mb) {
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const int i = q0 + wr + mb * 16 + 8 * hr;
      row_lse[mb][hr] = i < len ? lse[lse0 + i] * C::unit : 0.f;
      row_dsum[mb][hr] = i < len ? dsum[lse0 + i] : 0.f;
    }
  }
  float acc[MB][DC / 8][4] = {};

  for (int it = 0; it < n_tiles; ++it) {
    const int buf = it % C::stages;
    if (C::stages > 1 && it + 1 < n_tiles) {
      load_kv(it + 1, (it + 1) % C::stages);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int k0 = (kt0 + it) * BK;
    const T* kb = k_s + buf * BK * ST;
    const int* kseg = kseg_s + buf * BK;
    float s[MB][BK / 8][4] = {}, dp[MB][BK / 8][4] = {};
    mma_abt2<T, HD, MB, BK / 8>(s, q_s + warp * 16 * MB * ST, kb, dp, do_s + warp * 16 * MB * ST, v_s + buf * BK * ST);
    const bool masked = needs_mask(a, q0, BQ, k0, BK, len);
#pragma unroll
    for (int mb = 0; mb < MB; ++mb) {
#pragma unroll
      for (int n = 0; n < BK / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = wr + mb * 16 + (e / 2) * 8, c = n * 8 + 2 * t4 + e % 2;
          const bool vis = !masked || visible(a, q0 + r, k0 + c, len, qseg_s[r], kseg[c]);
          if constexpr (logits) {
            float th;
            const float z = final_logit<T, Cap, Alibi>(s[mb][n][e], k0 + c - (q0 + r), lm, th);
            const float p = vis ? exp_u<T>(z - row_lse[mb][e / 2]) : 0.f;
            const float ds = p * (dp[mb][n][e] - row_dsum[mb][e / 2]);
            s[mb][n][e] = Cap ? ds * (1.f - th * th) : ds;
          } else {
            const float p = vis ? exp_u<T>(fmaf(s[mb][n][e], sc, -row_lse[mb][e / 2])) : 0.f;
            s[mb][n][e] = p * (dp[mb][n][e] - row_dsum[mb][e / 2]);
          }
        }
      }
    }
    mma_pv<T, HD, MB, BK / 16, DC / 8>(acc, s, kb + d0, p_s + warp * 16 * MB * (BK + 4));
    __syncthreads();
    if (C::stages == 1 && it + 1 < n_tiles) {
      load_kv(it + 1, 0);
      cp_async_commit();
    }
  }

#pragma unroll
  for (int mb = 0; mb < MB; ++mb) {
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const int i = q0 + wr + mb * 16 + 8 * hr;
      if (i >= a.seq) continue;
      const float f = i < len ? a.scale : 0.f;
      T* row = dq + (tok0 + i) * a.q_stride + q_off + d0;
#pragma unroll
      for (int n = 0; n < DC / 8; ++n) {
        store_pair(row, n * 8 + 2 * t4, f * acc[mb][n][2 * hr], f * acc[mb][n][2 * hr + 1], a.hd - d0, a.vec);
      }
    }
  }
}

// Block (key tile, kv head, batch · column split, group split gs): dk, dv for output columns [d0, d0 + dcols); warp w
// owns keys 16w..16w+15; for every query head of its share of the GQA group (heads gs·group/gsplit.. in order), the
// query tiles that see the keys stream through smem. Transposed products: sᵀ = K·Qᵀ, dpᵀ = V·dOᵀ, dv += pᵀ·dO,
// dk += dsᵀ·Q (then · scale). With gsplit > 1 the block writes fp32 partial sums to dk_part/dv_part + gs·part_stride
// (laid out as dk/dv) and attn_group_sum_kernel adds them in gs order: more blocks in flight, still deterministic.
// Cap / Alibi: p and ds of the final logits, as in attn_dq_kernel.
template <typename T, int HD, bool Cap, bool Alibi>
__global__ void __launch_bounds__(threads)
    attn_dkdv_kernel(T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const float* lse,
                     const float* dsum, const attn_args a, float* dk_part, float* dv_part, int gsplit,
                     int64_t part_stride, int64_t v_part_stride) {
  constexpr bool logits = Cap || Alibi;
  using C = cfg<T, HD>;
  using L = dkdv_layout<T, HD>;
  constexpr int BKB = C::bkb, BQB = C::bqb, ST = C::stride, DC = C::dcols, splits = HD / DC;
  extern __shared__ __align__(16) unsigned char smem[];
  T* k_s = reinterpret_cast<T*>(smem + L::k);
  T* v_s = reinterpret_cast<T*>(smem + L::v);
  T* q_s = reinterpret_cast<T*>(smem + L::q);
  T* do_s = reinterpret_cast<T*>(smem + L::dout);
  float* p_s = reinterpret_cast<float*>(smem + L::p);
  float* lse_s = reinterpret_cast<float*>(smem + L::lse);
  float* dsum_s = reinterpret_cast<float*>(smem + L::dsum);
  int* kseg_s = reinterpret_cast<int*>(smem + L::kseg);
  int* qseg_s = reinterpret_cast<int*>(smem + L::qseg);

  const int n_kv = a.n_heads / a.group, d0 = (blockIdx.x % splits) * DC, kvh = (blockIdx.x / splits) % n_kv;
  const int b = blockIdx.x / splits / n_kv, k0 = blockIdx.y * BKB;  // heaviest (earliest) tiles first
  const int gs = blockIdx.z, heads = a.group / gsplit;
  const bool partial = gsplit > 1;
  float* dkp = partial ? dk_part + gs * part_stride : nullptr;
  float* dvp = partial ? dv_part + gs * v_part_stride : nullptr;
  const int len = valid_len(a, b);
  const int64_t tok0 = static_cast<int64_t>(b) * a.seq, kv_off = static_cast<int64_t>(kvh) * a.hd;
  const int64_t v_off = static_cast<int64_t>(kvh) * a.vd;
  if (k0 >= len) {
    const int rows = min(BKB, a.seq - k0), cols = min(DC, a.hd - d0), v_cols = min(DC, a.vd - d0);
    const int64_t at = (tok0 + k0) * a.kv_stride + kv_off + d0, v_at = (tok0 + k0) * a.v_stride + v_off + d0;
    if (partial) {
      zero_rows(dkp + at, a.kv_stride, rows, cols);
      zero_rows(dvp + v_at, a.v_stride, rows, v_cols);
    } else {
      zero_rows(dk + at, a.kv_stride, rows, cols);
      zero_rows(dv + v_at, a.v_stride, rows, v_cols);
    }
    return;
  }
  // Queries that see keys [k0, k0 + BKB): i in [k0, i_last].
  const int i_last = a.window > 0 ? min(len - 1, k0 + BKB - 1 + a.window - 1) : len - 1;
  const int qt0 = k0 / BQB, nq = i_last / BQB - qt0 + 1, n_iter = heads * nq;
  const int k_valid = min(BKB, len - k0);

  load_tile<T, BKB, HD>(k_s, k + (tok0 + k0) * a.kv_stride + kv_off, a.kv_stride, k_valid, a, a.hd);
  load_tile<T, BKB, HD>(v_s, v + (tok0 + k0) * a.v_stride + v_off, a.v_stride, k_valid, a, a.vd);
  load_segments(kseg_s, a, tok0 + k0, BKB, k_valid);
  auto load_q = [&](int it, int buf) {
    const int h = kvh * a.group + gs * heads + it / nq, q0 = (qt0 + it % nq) * BQB, n_valid = min(BQB, len - q0);
    const int64_t src = (tok0 + q0) * a.q_stride + static_cast<int64_t>(h) * a.hd;
    const int64_t o_src = (tok0 + q0) * a.o_stride + static_cast<int64_t>(h) * a.vd;
    load_tile<T, BQB, HD>(q_s + buf * BQB * ST, q + src, a.q_stride, n_valid, a, a.hd);
    load_tile<T, BQB, HD>(do_s + buf * BQB * ST, dout + o_src, a.o_stride, n_valid, a, a.vd);
    const int64_t l0 = (static_cast<int64_t>(b) * a.n_heads + h) * a.seq + q0;
    for (int r = threadIdx.x; r < BQB; r += threads) {
      lse_s[buf * BQB + r] = r < n_valid ? lse[l0 + r] * C::unit : 0.f;
      dsum_s[buf * BQB + r] = r < n_valid ? dsum[l0 + r] : 0.f;
    }
    load_segments(qseg_s + buf * BQB, a, tok0 + q0, BQB, n_valid);
  };
  load_q(0, 0);
  cp_async_commit();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, t4 = lane % 4;
  const int wr = warp * 16 + lane / 4;  // this thread's key rows: wr and wr + 8
  const float sc = a.scale * C::unit;
  float dk_acc[1][DC / 8][4] = {}, dv_acc[1][DC / 8][4] = {};

  for (int it = 0; it < n_iter; ++it) {
    const int buf = it % C::stages;
    if (C::stages > 1 && it + 1 < n_iter) {
      load_q(it + 1, (it + 1) % C::stages);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int q0 = (qt0 + it % nq) * BQB;
    const T* qb = q_s + buf * BQB * ST;
    const T* dob = do_s + buf * BQB * ST;
    const float* lseb = lse_s + buf * BQB;
    const float* dsumb = dsum_s + buf * BQB;
    const int* qseg = qseg_s + buf * BQB;
    float st[1][BQB / 8][4] = {}, dpt[1][BQB / 8][4] = {};
    mma_abt2<T, HD, 1, BQB / 8>(st, k_s + warp * 16 * ST, qb, dpt, v_s + warp * 16 * ST, dob);
    const bool masked = needs_mask(a, q0, BQB, k0, BKB, len);
    [[maybe_unused]] logit_map lm;
    if constexpr (logits) lm = logit_map_of<T, HD, Cap, Alibi>(a, kvh * a.group + gs * heads + it / nq);
#pragma unroll
    for (int n = 0; n < BQB / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int jr = wr + (e / 2) * 8, c = n * 8 + 2 * t4 + e % 2;  // key row, query column
        const bool vis = !masked || visible(a, q0 + c, k0 + jr, len, qseg[c], kseg_s[jr]);
        if constexpr (logits) {
          float th;
          const float z = final_logit<T, Cap, Alibi>(st[0][n][e], k0 + jr - (q0 + c), lm, th);
          const float p = vis ? exp_u<T>(z - lseb[c]) : 0.f;
          const float ds = p * (dpt[0][n][e] - dsumb[c]);
          st[0][n][e] = p;
          dpt[0][n][e] = Cap ? ds * (1.f - th * th) : ds;
        } else {
          const float p = vis ? exp_u<T>(fmaf(st[0][n][e], sc, -lseb[c])) : 0.f;
          st[0][n][e] = p;
          dpt[0][n][e] = p * (dpt[0][n][e] - dsumb[c]);
        }
      }
    }
    float* staging = p_s + warp * 16 * (BQB + 4);
    mma_pv<T, HD, 1, BQB / 16, DC / 8>(dv_acc, st, dob + d0, staging);
    mma_pv<T, HD, 1, BQB / 16, DC / 8>(dk_acc, dpt, qb + d0, staging);
    __syncthreads();
    if (C::stages == 1 && it + 1 < n_iter) {
      load_q(it + 1, 0);
      cp_async_commit();
    }
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int j = k0 + wr + 8 * r;
    if (j >= a.seq) continue;
    const bool valid = j < len;
    const int64_t off = (tok0 + j) * a.kv_stride + kv_off + d0, v_at = (tok0 + j) * a.v_stride + v_off + d0;
#pragma unroll
    for (int n = 0; n < DC / 8; ++n) {
      const int d = n * 8 + 2 * t4;
      const float k0v = valid ? a.scale * dk_acc[0][n][2 * r] : 0.f;
      const float k1v = valid ? a.scale * dk_acc[0][n][2 * r + 1] : 0.f;
      const float v0v = valid ? dv_acc[0][n][2 * r] : 0.f, v1v = valid ? dv_acc[0][n][2 * r + 1] : 0.f;
      if (partial) {
        store_pair(dkp + off, d, k0v, k1v, a.hd - d0, a.vec);
        store_pair(dvp + v_at, d, v0v, v1v, a.vd - d0, a.vec);
      } else {
        store_pair(dk + off, d, k0v, k1v, a.hd - d0, a.vec);
        store_pair(dv + v_at, d, v0v, v1v, a.vd - d0, a.vec);
      }
    }
  }
}

// out[i] = Σ_gs part[gs·stride + i], gs in order (the dk/dv partial sums of the GQA group splits).
template <typename T>
__global__ void attn_group_sum_kernel(T* out, const float* part, int gsplit, int64_t stride, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    float acc = 0.f;
    for (int g = 0; g < gsplit; ++g) acc += part[g * stride + i];
    out[i] = from_f32<T>(acc);
  }
}

// Checks the shape and packs the kernel arguments; vec needs hd to fill whole 16-byte chunks and aligned pointers.
template <typename T>
attn_args make_args(const char* op, const AttnShape& s, std::initializer_list<const void*> ptrs) {
  MT_ASSERT(s.batch > 0 && s.seq > 0 && s.window >= 0, "{}: batch {} seq {} window {}", op, s.batch, s.seq, s.window);
  MT_ASSERT(s.head_dim >= 1 && s.head_dim <= 256, "{}: head_dim {} outside [1, 256]", op, s.head_dim);
  const int64_t vd = s.v_head_dim > 0 ? s.v_head_dim : s.head_dim;
  MT_ASSERT(vd <= 256, "{}: v_head_dim {} above 256", op, vd);
  MT_ASSERT(s.n_kv_heads > 0 && s.n_heads % s.n_kv_heads == 0, "{}: n_heads {} n_kv_heads {}", op, s.n_heads,
            s.n_kv_heads);
  MT_ASSERT(s.seq <= (int64_t{1} << 21) && s.batch * s.n_heads * 2 <= (int64_t{1} << 31) - 1,
            "{}: batch {} seq {} n_heads {} exceed the grid", op, s.batch, s.seq, s.n_heads);
  attn_args a;
  a.seq = static_cast<int>(s.seq);
  a.n_heads = static_cast<int>(s.n_heads);
  a.hd = static_cast<int>(s.head_dim);
  a.group = static_cast<int>(s.n_heads / s.n_kv_heads);
  a.window = static_cast<int>(std::min(s.window, s.seq));
  a.q_stride = s.n_heads * s.head_dim;
  a.kv_stride = s.n_kv_heads * s.head_dim;
  a.vd = static_cast<int>(vd);
  a.o_stride = s.n_heads * vd;
  a.v_stride = s.n_kv_heads * vd;
  a.seq_lens = s.seq_lens;
  a.segments = s.segments;
  MT_ASSERT(std::isfinite(s.scale) && s.scale >= 0.f, "{}: scale {} (0 = 1/sqrt(head_dim))", op, s.scale);
  MT_ASSERT(std::isfinite(s.softcap) && s.softcap >= 0.f, "{}: softcap {} (0 = none)", op, s.softcap);
  a.scale = s.scale > 0.f ? s.scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
  a.cap = s.softcap;
  a.alibi = s.alibi_slopes;
  a.sinks = s.sinks;
  a.vec = vec_ok(vec16<T>, {s.head_dim, vd}, ptrs);
  return a;
}

int hd_bucket(int hd) { return hd <= 32 ? 32 : hd <= 64 ? 64 : hd <= 128 ? 128 : 256; }

// Calls f(std::integral_constant<int, HD>{}, std::bool_constant<Cap>{}, std::bool_constant<Alibi>{}) for the head_dim
// bucket (of the larger of the q/k and value head dims) and the kernel variant of a.
template <typename F>
void with_variant(const attn_args& a, F&& f) {
  auto features = [&](auto hd) {
    const bool cap = a.cap > 0.f, alibi = a.alibi != nullptr;
    if (cap && alibi) {
      f(hd, std::true_type{}, std::true_type{});
    } else if (cap) {
      f(hd, std::true_type{}, std::false_type{});
    } else if (alibi) {
      f(hd, std::false_type{}, std::true_type{});
    } else {
      f(hd, std::false_type{}, std::false_type{});
    }
  };
  switch (hd_bucket(std::max(a.hd, a.vd))) {
    case 32: features(std::integral_constant<int, 32>{}); break;
    case 64: features(std::integral_constant<int, 64>{}); break;
    case 128: features(std::integral_constant<int, 128>{}); break;
    default: features(std::integral_constant<int, 256>{}); break;
  }
}

unsigned tiles(int n, int tile) { return static_cast<unsigned>((n + tile - 1) / tile); }

template <typename T, int HD, bool Cap, bool Alibi, bool Sink>
void launch_forward(T* out, float* lse, const T* q, const T* k, const T* v, const attn_args& a, int batch,
                    cudaStream_t s) {
  using C = cfg<T, HD>;
  constexpr int bytes = fwd_layout<T, HD>::bytes;
  MT_CUDA_CHECK("attention_forward", cudaFuncSetAttribute(attn_forward_kernel<T, HD, Cap, Alibi, Sink>,
                                                          cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  const dim3 grid(static_cast<unsigned>(a.n_heads * batch), tiles(a.seq, C::bq));
  attn_forward_kernel<T, HD, Cap, Alibi, Sink><<<grid, threads, bytes, s>>>(out, lse, q, k, v, a);
  MT_CHECK_LAUNCH("attention_forward", "batch={} seq={} n_heads={} group={} head_dim={} window={} scale={} softcap={} "
                  "alibi={} sinks={}", batch, a.seq, a.n_heads, a.group, a.hd, a.window, a.scale, a.cap, Alibi, Sink);
}

template <typename T, int HD, bool Cap, bool Alibi>
void launch_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const float* lse,
                     const float* dsum, const attn_args& a, int batch, cudaStream_t s) {
  using C = cfg<T, HD>;
  constexpr int splits = HD / C::dcols, dq_bytes = dq_layout<T, HD>::bytes, dkdv_bytes = dkdv_layout<T, HD>::bytes;
  MT_CUDA_CHECK("attention_backward", cudaFuncSetAttribute(attn_dq_kernel<T, HD, Cap, Alibi>,
                                                           cudaFuncAttributeMaxDynamicSharedMemorySize, dq_bytes));
  MT_CUDA_CHECK("attention_backward", cudaFuncSetAttribute(attn_dkdv_kernel<T, HD, Cap, Alibi>,
                                                           cudaFuncAttributeMaxDynamicSharedMemorySize, dkdv_bytes));
  const dim3 dq_grid(static_cast<unsigned>(a.n_heads * batch * splits), tiles(a.seq, C::bq));
  attn_dq_kernel<T, HD, Cap, Alibi><<<dq_grid, threads, dq_bytes, s>>>(dq, dout, q, k, v, lse, dsum, a);
  MT_CHECK_LAUNCH("attention_backward dq", "batch={} seq={} n_heads={} group={} head_dim={} window={}", batch, a.seq,
                  a.n_heads, a.group, a.hd, a.window);
  // Split the GQA group over blocks (the largest divisor keeping about four blocks per SM) when one block per kv
  // head and key tile would leave the GPU mostly idle.
  const unsigned base = static_cast<unsigned>(a.n_heads / a.group * batch * splits) * tiles(a.seq, C::bkb);
  int gsplit = 1;
  for (int d = 2; d <= a.group; ++d)
    if (a.group % d == 0 && static_cast<int64_t>(base) * d <= 4 * static_cast<int64_t>(sm_count())) gsplit = d;
  const int64_t part_stride = static_cast<int64_t>(batch) * a.seq * a.kv_stride;
  const int64_t v_part_stride = static_cast<int64_t>(batch) * a.seq * a.v_stride;
  Scratch<float> dk_part("attention_backward", gsplit > 1 ? gsplit * part_stride : 0, s);
  Scratch<float> dv_part("attention_backward", gsplit > 1 ? gsplit * v_part_stride : 0, s);
  const dim3 dkdv_grid(static_cast<unsigned>(a.n_heads / a.group * batch * splits), tiles(a.seq, C::bkb),
                       static_cast<unsigned>(gsplit));
  attn_dkdv_kernel<T, HD, Cap, Alibi><<<dkdv_grid, threads, dkdv_bytes, s>>>(dk, dv, dout, q, k, v, lse, dsum, a,
                                                                             dk_part.get(), dv_part.get(), gsplit,
                                                                             part_stride, v_part_stride);
  MT_CHECK_LAUNCH("attention_backward dk/dv", "batch={} seq={} n_heads={} group={} head_dim={} window={} gsplit={}",
                  batch, a.seq, a.n_heads, a.group, a.hd, a.window, gsplit);
  if (gsplit > 1) {
    attn_group_sum_kernel<T><<<grid_for(part_stride, 256), 256, 0, s>>>(dk, dk_part.get(), gsplit, part_stride,
                                                                       part_stride);
    attn_group_sum_kernel<T><<<grid_for(v_part_stride, 256), 256, 0, s>>>(dv, dv_part.get(), gsplit, v_part_stride,
                                                                         v_part_stride);
    MT_CHECK_LAUNCH("attention_backward group sum", "gsplit={} elements={}", gsplit, part_stride);
  }
}

}  // namespace

template <typename T>
void attention_forward(T* out, float* lse, const T* q, const T* k, const T* v, const AttnShape& shape, cudaStream_t s) {
  const attn_args a = make_args<T>("attention_forward", shape, {out, q, k, v});
  const int batch = static_cast<int>(shape.batch);
  with_variant(a, [&](auto hd, auto cap, auto alibi) {
    constexpr bool plain = !decltype(cap)::value && !decltype(alibi)::value;
    if constexpr (plain) {  // sinks: only with plain logits (no family combines them with soft-cap or ALiBi)
      if (a.sinks != nullptr) {
        launch_forward<T, decltype(hd)::value, false, false, true>(out, lse, q, k, v, a, batch, s);
        return;
      }
    }
    MT_ASSERT(a.sinks == nullptr, "attention_forward: sinks with soft-capping or ALiBi are not supported");
    launch_forward<T, decltype(hd)::value, decltype(cap)::value, decltype(alibi)::value, false>(out, lse, q, k, v, a,
                                                                                                batch, s);
  });
}

template <typename T>
void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out,
                        const float* lse, const AttnShape& shape, cudaStream_t s) {
  const attn_args a = make_args<T>("attention_backward", shape, {dq, dk, dv, dout, q, k, v, out});
  const int batch = static_cast<int>(shape.batch);
  const int64_t rows = shape.batch * shape.seq * shape.n_heads;
  Scratch<float> dsum("attention_backward", rows, s);
  attn_dsum_kernel<T><<<grid_for(rows * 32, 256), 256, 0, s>>>(dsum.get(), dout, out, a, rows);
  MT_CHECK_LAUNCH("attention_backward dsum", "rows={} head_dim={}", rows, a.hd);
  with_variant(a, [&](auto hd, auto cap, auto alibi) {
    launch_backward<T, decltype(hd)::value, decltype(cap)::value, decltype(alibi)::value>(
        dq, dk, dv, dout, q, k, v, lse, dsum.get(), a, batch, s);
  });
}

template void attention_forward<float>(float*, float*, const float*, const float*, const float*, const AttnShape&,
                                       cudaStream_t);
template void attention_forward<__nv_bfloat16>(__nv_bfloat16*, float*, const __nv_bfloat16*, const __nv_bfloat16*,
                                               const __nv_bfloat16*, const AttnShape&, cudaStream_t);
template void attention_backward<float>(float*, float*, float*, const float*, const float*, const float*,
                                        const float*, const float*, const float*, const AttnShape&, cudaStream_t);
template void attention_backward<__nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*,
                                                const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*,
                                                const __nv_bfloat16*, const __nv_bfloat16*, const float*,
                                                const AttnShape&, cudaStream_t);

}  // namespace mt::cuda
