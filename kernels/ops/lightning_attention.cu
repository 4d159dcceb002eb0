// Lightning attention (MiniMax) on the GPU in its recurrent form, state fp32 in registers. Every sum of the forward
// and the backward is one decayed sweep y_t = Σ_s w^|t−s|·(a_t·b_s)·c_s over a packed segment, forward (s ≤ t) or
// reverse (s ≥ t), with the running state M = Σ_s w^|t−s|·b_s·c_sᵀ (as the CPU reference,
// src/backend/cpu/lightning_attention.cpp): o = sweep(q, k, v); dq = sweep(do, v, k); dk = sweep(v, do, q) reversed;
// dv = sweep(k, q, do) reversed, each written × silu'(raw). One block runs one (sequence, head, tile of 32 columns of
// c): thread (x, y) owns column x of the tile and the state rows y, y + 8, ...; a token costs two barriers.
// Invariant: the CPU reference's semantics (q, k, v = silu(raw); state zero at every sequence and segment start;
// o = 0 and no gradient on padding); every output element is written once, its sum in a fixed order (deterministic);
// memory O(1) beyond the operands (no stored states).
#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int cols = 32;                    // columns of c (and y) per block, one per thread x
constexpr int row_groups = 8;               // threads y: thread (x, y) holds rows y, y + 8, ... of its column
constexpr int max_head_dim = 256;
constexpr int max_rows = max_head_dim / row_groups;
constexpr int max_heads = 256;

// One operand of a sweep: element i of token row r, head h at p[r·stride + h·head_step + offset + i], passed
// through SiLU where silu.
template <typename T>
struct Operand {
  const T* p;
  int64_t stride, head_step, offset;
  bool silu;
  __device__ float at(int64_t r, int64_t h, int64_t i) const {
    const float x = to_f32(p[r * stride + h * head_step + offset + i]);
    return silu ? x / (1.f + __expf(-x)) : x;
  }
};

// Where a sweep writes: y[r·stride + h·head_step + offset + i], × silu'(raw) (raw at the same place) where raw.
template <typename T>
struct Output {
  T* p;
  const T* raw;
  int64_t stride, head_step, offset;
};

struct Sweep {
  int64_t batch, seq, heads, d;
  const int32_t* seq_lens;
  const int32_t* segments;
  bool reverse;
  float decay[max_heads];  // w_h = exp(−λ_h)
  __host__ __device__ int64_t tiles() const { return (d + cols - 1) / cols; }
  __device__ int64_t length(int64_t b) const { return seq_lens ? seq_lens[b] : seq; }
  // Whether token t starts a segment in sweep order (the previous token of the sweep is in another example).
  __device__ bool restarts(int64_t b, int64_t t, int64_t len) const {
    const int64_t prev = reverse ? t + 1 : t - 1;
    if (prev < 0 || prev >= len) return true;
    return segments && segments[b * seq + t] != segments[b * seq + prev];
  }
};

template <typename T>
__global__ void __launch_bounds__(cols* row_groups)
    sweep_kernel(Output<T> y, Operand<T> a, Operand<T> b, Operand<T> c, Sweep S) {
  __shared__ float a_s[max_head_dim], b_s[max_head_dim], c_s[cols], red[row_groups][cols];
  const int64_t tiles = S.tiles();
  const int64_t tile = blockIdx.x % tiles, h = blockIdx.x / tiles % S.heads, seq = blockIdx.x / tiles / S.heads;
  const int tx = threadIdx.x % cols, ty = threadIdx.x / cols;
  const int64_t j = tile * cols + tx, d = S.d, len = S.length(seq);
  const float w = S.decay[h];
  float m[max_rows];
#pragma unroll
  for (int r = 0; r < max_rows; ++r) m[r] = 0.f;
  for (int64_t n = 0; n < len; ++n) {
    const int64_t t = S.reverse ? len - 1 - n : n, row = seq * S.seq + t;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      a_s[i] = a.at(row, h, i);
      b_s[i] = b.at(row, h, i);
    }
    if (ty == 0) c_s[tx] = j < d ? c.at(row, h, j) : 0.f;
    if (S.restarts(seq, t, len)) {
#pragma unroll
      for (int r = 0; r < max_rows; ++r) m[r] = 0.f;
    }
    __syncthreads();
    float partial = 0.f;
    const float cj = c_s[tx];
#pragma unroll
    for (int r = 0; r < max_rows; ++r) {
      const int64_t i = ty + static_cast<int64_t>(r) * row_groups;
      if (i < d) {
        m[r] = w * m[r] + b_s[i] * cj;
        partial += a_s[i] * m[r];
      }
    }
    red[ty][tx] = partial;
    __syncthreads();
    if (ty == 0 && j < d) {
      float sum = 0.f;
      for (int g = 0; g < row_groups; ++g) sum += red[g][tx];
      const int64_t at = row * y.stride + h * y.head_step + y.offset + j;
      if (y.raw) {
        const float x = to_f32(y.raw[at]), sg = 1.f / (1.f + __expf(-x));
        sum *= sg * (1.f + x * (1.f - sg));
      }
      y.p[at] = from_f32<T>(sum);
    }
  }
  if (ty == 0 && j < d)  // padding: o = 0, no gradient
    for (int64_t t = len; t < S.seq; ++t) y.p[(seq * S.seq + t) * y.stride + h * y.head_step + y.offset + j] = from_f32<T>(0.f);
}

void check_shape(const char* op, const LightningShape& s) {
  MT_ASSERT(s.batch >= 0 && s.seq >= 0 && s.n_heads > 0 && s.n_heads <= max_heads && s.head_dim > 0 &&
                s.head_dim <= max_head_dim,
            "{}: batch={} seq={} heads {} (at most {}) head_dim {} (at most {})", op, s.batch, s.seq, s.n_heads,
            max_heads, s.head_dim, max_head_dim);
}

Sweep sweep_of(const LightningShape& s, bool reverse) {
  Sweep S{s.batch, s.seq, s.n_heads, s.head_dim, s.seq_lens, s.segments, reverse, {}};
  for (int64_t h = 0; h < s.n_heads; ++h)
    S.decay[h] = std::exp(-lightning_decay_rate(h, s.n_heads, s.decay_factor));
  return S;
}

template <typename T>
void run_sweep(const char* op, const Output<T>& y, const Operand<T>& a, const Operand<T>& b, const Operand<T>& c,
               const LightningShape& s, bool reverse, cudaStream_t st) {
  const Sweep S = sweep_of(s, reverse);
  const auto blocks = static_cast<unsigned>(s.batch * s.n_heads * S.tiles());
  sweep_kernel<T><<<blocks, cols * row_groups, 0, st>>>(y, a, b, c, S);
  MT_CHECK_LAUNCH(op, "batch={} seq={} heads {} head_dim {} reverse {}", s.batch, s.seq, s.n_heads, s.head_dim,
                  reverse);
}

// Part p (0 q, 1 k, 2 v) of qkv, through SiLU.
template <typename T>
Operand<T> qkv_part(const T* qkv, const LightningShape& s, int p) {
  return {qkv, s.row(), 3 * s.head_dim, p * s.head_dim, true};
}

}  // namespace

template <typename T>
void lightning_attention_forward(T* o, const T* qkv, const LightningShape& s, cudaStream_t st) {
  check_shape("lightning_attention_forward", s);
  if (s.batch == 0 || s.seq == 0) return;
  const Output<T> y{o, nullptr, s.width(), s.head_dim, 0};
  run_sweep("lightning_attention_forward", y, qkv_part(qkv, s, 0), qkv_part(qkv, s, 1), qkv_part(qkv, s, 2), s, false,
            st);
}

template <typename T>
void lightning_attention_backward(T* d_qkv, const T* d_o, const T* qkv, const LightningShape& s, cudaStream_t st) {
  check_shape("lightning_attention_backward", s);
  if (s.batch == 0 || s.seq == 0) return;
  const Operand<T> dout{d_o, s.width(), s.head_dim, 0, false};
  const auto grad = [&](int p) { return Output<T>{d_qkv, qkv, s.row(), 3 * s.head_dim, p * s.head_dim}; };
  const char* op = "lightning_attention_backward";
  run_sweep(op, grad(0), dout, qkv_part(qkv, s, 2), qkv_part(qkv, s, 1), s, false, st);  // dq = sweep(do, v, k)
  run_sweep(op, grad(1), qkv_part(qkv, s, 2), dout, qkv_part(qkv, s, 0), s, true, st);   // dk = sweep(v, do, q)ᴿ
  run_sweep(op, grad(2), qkv_part(qkv, s, 1), qkv_part(qkv, s, 0), dout, s, true, st);   // dv = sweep(k, q, do)ᴿ
}

template void lightning_attention_forward<float>(float*, const float*, const LightningShape&, cudaStream_t);
template void lightning_attention_forward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const LightningShape&,
                                                         cudaStream_t);
template void lightning_attention_backward<float>(float*, const float*, const float*, const LightningShape&,
                                                  cudaStream_t);
template void lightning_attention_backward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*,
                                                          const __nv_bfloat16*, const LightningShape&, cudaStream_t);

}  // namespace mt::cuda
