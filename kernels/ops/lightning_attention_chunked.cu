// Lightning attention (MiniMax) on the GPU in chunked form: the recurrent kernel's four decayed sweeps
// y_t = Σ_s w^|t−s|·(a_t·b_s)·c_s (o = sweep(q, k, v); dq = sweep(do, v, k); dk = sweep(v, do, q) and
// dv = sweep(k, q, do) reversed; see kernels/ops/lightning_attention.cu) taken C = 64 tokens at a time, as
// transformers' MiniMaxLightningAttention takes its blocks. Positions count in sweep order (a reverse sweep is a
// forward one over the reversed tokens); per chunk of rows r, with D[r, s] = w^(r−s) for s ≤ r in r's segment:
//   y = (A·Bᵀ ⊙ D)·C + diag(α)·A·M,   α_r = w^(r+1) where r's segment began before the chunk, else 0;
//   M ← γ·M + Bᵀ·diag(β)·C,           β_s = w^(n−1−s) in the last row's segment, γ = w^n if the chunk is one segment
// carried from before, else 0 (n: the chunk's valid rows). One block runs one (sequence, head, 32 columns of c, y and
// the state M [head_dim, 32], fp32 in shared memory: 110 KB at head_dim 128, two blocks an SM) through its chunks in
// turn; the backward's three sweeps are one launch. The products run on kernels/ops/block_mm.cuh: bf16 operands on
// tensor cores (wmma 16×16×16, fp32 accumulation; M is read as bf16, its running sum stays fp32), fp32 operands by
// FMA loops. Decays are powers of the fp32 w = exp(−λ_h) that the recurrent kernel and the CPU reference multiply by,
// taken as exp(n·ln w).
// Invariant: the CPU reference's semantics (q, k, v = silu(raw); state zero at every sequence and segment start;
// o = 0 and no gradient on padding); every output element is written once, its sum in a fixed order
// (deterministic); no memory beyond the operands (the states never leave shared memory).
#include <cmath>
#include <type_traits>

#include "kernels/ops/block_mm.cuh"
#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int chunk = 64;    // tokens per chunk: a chunk's segment starts are one 64-bit mask
constexpr int cols = 32;     // columns of c, y and the state per block
constexpr int threads = 256;
constexpr int max_heads = 256;
static_assert(chunk <= 64 && chunk <= threads && chunk % 32 == 0);

// One operand of a sweep: element i of token row r, head h at p[r·stride + h·head_step + offset + i], through SiLU
// where silu (as the recurrent kernel's).
template <typename T>
struct Operand {
  const T* p;
  int64_t stride, head_step, offset;
  bool silu;
};

// Where a sweep writes: y[r·stride + h·head_step + offset + i], × silu'(raw) (raw at the same place) where raw.
template <typename T>
struct Output {
  T* p;
  const T* raw;
  int64_t stride, head_step, offset;
};

template <typename T>
struct Job {
  Output<T> y;
  Operand<T> a, b, c;
  bool reverse;
};

template <typename T>
struct Params {
  Job<T> jobs[3];  // blockIdx.y picks one
  int64_t seq, heads, d;
  int dp;          // head_dim padded to 16
  bool vec;        // every operand allows 16-byte loads (vec_ok)
  const int32_t* seq_lens;
  const int32_t* segments;
  float log_w[max_heads];  // ln w_h of the fp32 w_h = exp(−λ_h)
};

// Shared-memory layout (byte offsets) for head dims padded to dp; strides in elements, padded against bank
// conflicts and kept to wmma's alignment (rows of 16 start on 32 bytes).
struct Smem {
  int ldk, ldn, ldp, lds, ldf;  // A, B (T); C, diag(β)·C, M as T (T); P (T); S (fp32); Y, M, ΔM (fp32)
  int a, b, c, cb, p, f, y, m, mb, pw, first, alpha, beta, mask;
  int bytes;
};

template <typename T>
Smem smem_of(int dp) {
  Smem L{};
  L.ldk = dp + 8;
  L.ldn = cols + 8;
  L.ldp = chunk + 8;
  L.lds = chunk + 4;
  L.ldf = cols + 4;
  const auto take = [&](int bytes) {
    const int at = L.bytes;
    L.bytes += (bytes + 127) / 128 * 128;
    return at;
  };
  const int es = static_cast<int>(sizeof(T));
  L.a = take(chunk * L.ldk * es);
  L.b = take(chunk * L.ldk * es);
  L.c = take(chunk * L.ldn * es);
  L.cb = take(chunk * L.ldn * es);
  L.p = take(chunk * L.ldp * es);
  L.f = take(4 * (chunk * L.lds > dp * L.ldf ? chunk * L.lds : dp * L.ldf));  // S, then ΔM
  L.y = take(4 * chunk * L.ldf);
  L.m = take(4 * dp * L.ldf);
  L.mb = std::is_same_v<T, float> ? L.m : take(dp * L.ldn * es);  // fp32: the products read M itself
  L.pw = take(4 * (chunk + 1));
  L.first = take(4 * chunk);
  L.alpha = take(4 * chunk);
  L.beta = take(4 * chunk);
  L.mask = take(8);
  return L;
}

__device__ __forceinline__ float silu(float x) { return x / (1.f + __expf(-x)); }

// Chunk rows to tokens: row r of chunk k is sweep position k·chunk + r, token t of sequence b (row b·seq + t of the
// operands) if the position is below the sequence's length.
struct Rows {
  int64_t b, seq, len, pos0;
  bool reverse;
  __device__ bool valid(int r) const { return pos0 + r < len; }
  __device__ int64_t token(int r) const { return reverse ? len - 1 - (pos0 + r) : pos0 + r; }
  __device__ int64_t row(int r) const { return b * seq + token(r); }
};

// Accesses in flight per thread in the copies below: each thread issues this many loads before it stores any, so a
// copy costs about one memory latency rather than one per element.
constexpr int in_flight = 4;

// dst[r·ld + j] (T) ← x at (rows' row r, head h, column col0 + j) for j < width: 0 on invalid rows and at columns
// ≥ valid_cols. 16-byte accesses where vec (valid_cols − col0 and width multiples of the access then).
template <typename T>
__device__ void load_rows(T* dst, int ld, const Operand<T>& x, const Rows& R, int64_t h, int64_t col0, int width,
                          int64_t valid_cols, bool vec) {
  const int64_t base = h * x.head_step + x.offset + col0;
  if (vec) {
    constexpr int V = vec16<T>;
    const int units = width / V, total = chunk * units;
    for (int e0 = threadIdx.x; e0 < total; e0 += in_flight * blockDim.x) {
      Pack<T, V> pk[in_flight];
#pragma unroll
      for (int u = 0; u < in_flight; ++u) {
        const int e = e0 + u * blockDim.x, r = e / units, j = e % units * V;
        if (e < total && R.valid(r) && col0 + j < valid_cols) {
          pk[u] = *reinterpret_cast<const Pack<T, V>*>(x.p + R.row(r) * x.stride + base + j);
        } else {
#pragma unroll
          for (int v = 0; v < V; ++v) pk[u].v[v] = from_f32<T>(0.f);
        }
      }
#pragma unroll
      for (int u = 0; u < in_flight; ++u) {
        const int e = e0 + u * blockDim.x, r = e / units, j = e % units * V;
        if (e >= total) break;
        if (x.silu) {
#pragma unroll
          for (int v = 0; v < V; ++v) pk[u].v[v] = from_f32<T>(silu(to_f32(pk[u].v[v])));
        }
        *reinterpret_cast<Pack<T, V>*>(dst + r * ld + j) = pk[u];
      }
    }
  } else {
    for (int e = threadIdx.x; e < chunk * width; e += blockDim.x) {
      const int r = e / width, j = e % width;
      float v = 0.f;
      if (R.valid(r) && col0 + j < valid_cols) {
        v = to_f32(x.p[R.row(r) * x.stride + base + j]);
        if (x.silu) v = silu(v);
      }
      dst[r * ld + j] = from_f32<T>(v);
    }
  }
}

// Whether sweep position pos (a valid one) starts a segment: the previous token in sweep order is outside the
// sequence or in another packed example (the recurrent kernel's restarts).
__device__ bool restarts(const Rows& R, const int32_t* segments, int r) {
  const int64_t t = R.token(r), prev = R.reverse ? t + 1 : t - 1;
  if (prev < 0 || prev >= R.len) return true;
  return segments && segments[R.b * R.seq + t] != segments[R.b * R.seq + prev];
}

// The first row of row r's segment within the chunk (0 where it began before): the highest segment start ≤ r.
__device__ __forceinline__ int first_of(unsigned long long starts, int r) {
  const unsigned long long m = starts & ((2ull << r) - 1ull);
  return m ? 63 - __clzll(static_cast<long long>(m)) : 0;
}

// The chunk's operands into shared memory: a, b (head_dim columns, padded to dp with zeros), c's 32 columns from
// col0, and the mask of its rows that start a segment (warps 0 and 1, one row a lane).
template <typename T>
__device__ void load_chunk(T* A, T* B, T* Cc, unsigned* mask, const Job<T>& J, const Params<T>& P, const Smem& L,
                           const Rows& R, int64_t h, int64_t col0) {
  load_rows(A, L.ldk, J.a, R, h, 0, P.dp, P.d, P.vec);
  load_rows(B, L.ldk, J.b, R, h, 0, P.dp, P.d, P.vec);
  load_rows(Cc, L.ldn, J.c, R, h, col0, cols, P.d, P.vec);
  if (threadIdx.x < chunk) {
    const int r = threadIdx.x;
    const unsigned bits = __ballot_sync(0xffffffffu, R.valid(r) && restarts(R, P.segments, r));
    if (r % 32 == 0) mask[r / 32] = bits;
  }
}

template <typename T>
__global__ void __launch_bounds__(threads, 2) chunked_sweep_kernel(const __grid_constant__ Params<T> P, Smem L) {
  extern __shared__ __align__(128) unsigned char smem[];
  const Job<T>& J = P.jobs[blockIdx.y];
  const int64_t tiles = (P.d + cols - 1) / cols;
  const int64_t tile = blockIdx.x % tiles, h = blockIdx.x / tiles % P.heads, b = blockIdx.x / tiles / P.heads;
  const int64_t col0 = tile * cols, len = P.seq_lens ? P.seq_lens[b] : P.seq, dp = P.dp;
  T* A = reinterpret_cast<T*>(smem + L.a);
  T* B = reinterpret_cast<T*>(smem + L.b);
  T* Cc = reinterpret_cast<T*>(smem + L.c);
  T* Cb = reinterpret_cast<T*>(smem + L.cb);
  T* Pm = reinterpret_cast<T*>(smem + L.p);
  float* F = reinterpret_cast<float*>(smem + L.f);
  float* Y = reinterpret_cast<float*>(smem + L.y);
  float* M = reinterpret_cast<float*>(smem + L.m);
  T* Mb = reinterpret_cast<T*>(smem + L.mb);
  const int ldmb = std::is_same_v<T, float> ? L.ldf : L.ldn;
  float* pw = reinterpret_cast<float*>(smem + L.pw);
  int* first = reinterpret_cast<int*>(smem + L.first);
  float* alpha = reinterpret_cast<float*>(smem + L.alpha);
  float* beta = reinterpret_cast<float*>(smem + L.beta);
  unsigned* mask = reinterpret_cast<unsigned*>(smem + L.mask);

  for (int n = threadIdx.x; n <= chunk; n += blockDim.x) pw[n] = expf(P.log_w[h] * static_cast<float>(n));
  for (int e = threadIdx.x; e < dp * cols; e += blockDim.x) {
    const int i = e / cols, j = e % cols;
    M[i * L.ldf + j] = 0.f;
    if constexpr (!std::is_same_v<T, float>) Mb[i * L.ldn + j] = from_f32<T>(0.f);
  }
  const int64_t chunks = (len + chunk - 1) / chunk;
  if (chunks > 0) load_chunk(A, B, Cc, mask, J, P, L, Rows{b, P.seq, len, 0, J.reverse}, h, col0);
  __syncthreads();
  for (int64_t k = 0; k < chunks; ++k) {
    const Rows R{b, P.seq, len, k * chunk, J.reverse};
    const int n = static_cast<int>(len - k * chunk < chunk ? len - k * chunk : chunk);
    const unsigned long long starts = mask[0] | static_cast<unsigned long long>(mask[1]) << 32;
    const bool carries = (starts & 1ull) == 0;
    const int last_first = first_of(starts, n - 1);
    if (threadIdx.x < chunk) {  // read after block_mm's barriers
      const int r = threadIdx.x, f = first_of(starts, r);
      first[r] = f;
      alpha[r] = r < n && carries && f == 0 ? pw[r + 1] : 0.f;
      beta[r] = r < n && r >= last_first ? pw[n - 1 - r] : 0.f;
    }
    block_mm<false, true>(F, L.lds, A, L.ldk, B, L.ldk, chunk, chunk, P.dp, false);  // S = A·Bᵀ
    block_mm<false, false>(Y, L.ldf, A, L.ldk, Mb, ldmb, chunk, cols, P.dp, false);  // A·M
    for (int e = threadIdx.x; e < chunk * chunk; e += blockDim.x) {
      const int r = e / chunk, s = e % chunk;
      const float decay = s <= r && s >= first[r] ? pw[r - s] : 0.f;
      Pm[r * L.ldp + s] = from_f32<T>(F[r * L.lds + s] * decay);
    }
    for (int e = threadIdx.x; e < chunk * cols; e += blockDim.x) {
      const int r = e / cols, j = e % cols;
      Y[r * L.ldf + j] *= alpha[r];
      Cb[r * L.ldn + j] = from_f32<T>(to_f32(Cc[r * L.ldn + j]) * beta[r]);
    }
    __syncthreads();
    block_mm<false, false>(Y, L.ldf, Pm, L.ldp, Cc, L.ldn, chunk, cols, chunk, true);  // + (S ⊙ D)·C
    block_mm<true, false>(F, L.ldf, B, L.ldk, Cb, L.ldn, P.dp, cols, chunk, false);   // ΔM = Bᵀ·diag(β)·C
    for (int e0 = threadIdx.x; e0 < n * cols; e0 += in_flight * blockDim.x) {  // the raw values' loads first
      float x[in_flight];
#pragma unroll
      for (int u = 0; u < in_flight; ++u) {
        const int e = e0 + u * blockDim.x, r = e / cols, j = e % cols;
        x[u] = J.y.raw && e < n * cols && col0 + j < P.d
                   ? to_f32(J.y.raw[R.row(r) * J.y.stride + h * J.y.head_step + J.y.offset + col0 + j])
                   : 0.f;
      }
#pragma unroll
      for (int u = 0; u < in_flight; ++u) {
        const int e = e0 + u * blockDim.x, r = e / cols, j = e % cols;
        if (e >= n * cols || col0 + j >= P.d) continue;
        float v = Y[r * L.ldf + j];
        if (J.y.raw) {
          const float sg = 1.f / (1.f + __expf(-x[u]));
          v *= sg * (1.f + x[u] * (1.f - sg));
        }
        J.y.p[R.row(r) * J.y.stride + h * J.y.head_step + J.y.offset + col0 + j] = from_f32<T>(v);
      }
    }
    const float gamma = carries && last_first == 0 ? pw[n] : 0.f;
    for (int e = threadIdx.x; e < dp * cols; e += blockDim.x) {
      const int i = e / cols, j = e % cols;
      const float m = gamma * M[i * L.ldf + j] + F[i * L.ldf + j];
      M[i * L.ldf + j] = m;
      if constexpr (!std::is_same_v<T, float>) Mb[i * L.ldn + j] = from_f32<T>(m);
    }
    if (k + 1 < chunks) load_chunk(A, B, Cc, mask, J, P, L, Rows{b, P.seq, len, (k + 1) * chunk, J.reverse}, h, col0);
    __syncthreads();
  }
  for (int64_t e = threadIdx.x; e < (P.seq - len) * cols; e += blockDim.x) {  // padding: o = 0, no gradient
    const int64_t t = len + e / cols, j = col0 + e % cols;
    if (j < P.d) J.y.p[(b * P.seq + t) * J.y.stride + h * J.y.head_step + J.y.offset + j] = from_f32<T>(0.f);
  }
}

int padded16(int64_t d) { return static_cast<int>((d + 15) / 16 * 16); }

template <typename T>
bool vec_ok_of(const Operand<T>& x) {
  return vec_ok(vec16<T>, {x.stride, x.head_step, x.offset}, {x.p});
}

template <typename T>
void run_jobs(const char* op, const Job<T>* jobs, int count, const LightningShape& s, cudaStream_t st) {
  MT_ASSERT(lightning_attention_chunked_supports(s), "{}: batch={} seq={} heads {} (at most {}) head_dim {} (the "
            "chunked kernel takes at most {})", op, s.batch, s.seq, s.n_heads, max_heads, s.head_dim,
            kLightningChunkedMaxHeadDim);
  Params<T> P{};
  P.seq = s.seq;
  P.heads = s.n_heads;
  P.d = s.head_dim;
  P.dp = padded16(s.head_dim);
  P.seq_lens = s.seq_lens;
  P.segments = s.segments;
  P.vec = s.head_dim % vec16<T> == 0;
  for (int i = 0; i < count; ++i) {
    P.jobs[i] = jobs[i];
    P.vec = P.vec && vec_ok_of(jobs[i].a) && vec_ok_of(jobs[i].b) && vec_ok_of(jobs[i].c);
  }
  for (int64_t h = 0; h < s.n_heads; ++h) {
    const float w = std::exp(-lightning_decay_rate(h, s.n_heads, s.decay_factor));
    P.log_w[h] = static_cast<float>(std::log(static_cast<double>(w)));
  }
  const Smem L = smem_of<T>(P.dp);
  const auto kernel = chunked_sweep_kernel<T>;
  MT_CUDA_CHECK(op, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, L.bytes));
  const dim3 grid(static_cast<unsigned>(s.batch * s.n_heads * ((s.head_dim + cols - 1) / cols)),
                  static_cast<unsigned>(count));
  kernel<<<grid, threads, static_cast<size_t>(L.bytes), st>>>(P, L);
  MT_CHECK_LAUNCH(op, "batch={} seq={} heads {} head_dim {}, {} sweeps, {} bytes of shared memory", s.batch, s.seq,
                  s.n_heads, s.head_dim, count, L.bytes);
}

// Part p (0 q, 1 k, 2 v) of qkv, through SiLU.
template <typename T>
Operand<T> qkv_part(const T* qkv, const LightningShape& s, int p) {
  return {qkv, s.row(), 3 * s.head_dim, p * s.head_dim, true};
}

}  // namespace

bool lightning_attention_chunked_supports(const LightningShape& s) {
  return s.n_heads > 0 && s.n_heads <= max_heads && s.head_dim > 0 && s.head_dim <= kLightningChunkedMaxHeadDim &&
         s.batch >= 0 && s.seq >= 0;
}

template <typename T>
void lightning_attention_chunked_forward(T* o, const T* qkv, const LightningShape& s, cudaStream_t st) {
  const char* op = "lightning_attention_chunked_forward";
  if (s.batch == 0 || s.seq == 0) return;
  const Job<T> job{{o, nullptr, s.width(), s.head_dim, 0}, qkv_part(qkv, s, 0), qkv_part(qkv, s, 1),
                   qkv_part(qkv, s, 2), false};
  run_jobs(op, &job, 1, s, st);
}

template <typename T>
void lightning_attention_chunked_backward(T* d_qkv, const T* d_o, const T* qkv, const LightningShape& s,
                                          cudaStream_t st) {
  const char* op = "lightning_attention_chunked_backward";
  if (s.batch == 0 || s.seq == 0) return;
  const Operand<T> dout{d_o, s.width(), s.head_dim, 0, false};
  const auto grad = [&](int p) { return Output<T>{d_qkv, qkv, s.row(), 3 * s.head_dim, p * s.head_dim}; };
  const Job<T> jobs[3] = {
      {grad(0), dout, qkv_part(qkv, s, 2), qkv_part(qkv, s, 1), false},  // dq = sweep(do, v, k)
      {grad(1), qkv_part(qkv, s, 2), dout, qkv_part(qkv, s, 0), true},   // dk = sweep(v, do, q)ᴿ
      {grad(2), qkv_part(qkv, s, 1), qkv_part(qkv, s, 0), dout, true},   // dv = sweep(k, q, do)ᴿ
  };
  run_jobs(op, jobs, 3, s, st);
}

template void lightning_attention_chunked_forward<float>(float*, const float*, const LightningShape&, cudaStream_t);
template void lightning_attention_chunked_forward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*,
                                                                 const LightningShape&, cudaStream_t);
template void lightning_attention_chunked_backward<float>(float*, const float*, const float*, const LightningShape&,
                                                          cudaStream_t);
template void lightning_attention_chunked_backward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*,
                                                                  const __nv_bfloat16*, const LightningShape&,
                                                                  cudaStream_t);

}  // namespace mt::cuda
