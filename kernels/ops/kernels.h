// Launchers of the CUDA kernels, one op per file in kernels/ (forward and backward together).
// Invariant: every launcher takes the stream it runs on, asserts its preconditions (MT_ASSERT), enqueues
// work only on that stream (scratch via cudaMallocAsync/cudaFreeAsync on the same stream), never
// synchronises, and checks the launch (cudaGetLastError) with an error naming the op and its sizes.
// Element type T is float or __nv_bfloat16; accumulation is fp32; results are deterministic (no
// floating-point atomics: reductions run in a fixed order). Every pointer, including ids, positions, targets and
// AttnShape::seq_lens / segments, is device memory; their values are trusted (not range-checked on the host).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.h"
#include "core/activation.h"
#include "optim/adamw.h"

namespace mt::cuda {

// y[t] = table[ids[t]]; dtable[ids[t]] += dy[t] (fp32, deterministic: a stable sort by id, then each id's rows
// added in token order; tokens <= INT32_MAX).
template <typename T> void embedding_forward(T* y, const T* table, const int32_t* ids, int64_t tokens, int64_t H, cudaStream_t s);
template <typename T> void embedding_backward(float* dtable, const T* dy, const int32_t* ids, int64_t tokens, int64_t H, cudaStream_t s);

// HF RMSNorm over rows of D: y = (x·rstd)·(w + weight_offset), math in fp32; dx = (+ residual where not null, rounded
// as `add` rounds), dw += (fp32). With offset 0
// (Llama) x·rstd rounds to T before the weight multiply (HF LlamaRMSNorm); with an offset (Gemma's (1 + w)), or with
// fp32_product (OLMo 2/3's Olmo2RMSNorm), the product stays fp32 and rounds once (HF GemmaRMSNorm).
template <typename T> void rmsnorm_forward(T* y, const T* x, const T* w, int64_t N, int64_t D, float eps, float weight_offset, cudaStream_t s, bool fp32_product = false);
template <typename T> void rmsnorm_backward(T* dx, float* dw, const T* dy, const T* x, const T* w, const T* residual, int64_t N, int64_t D, float eps, float weight_offset, cudaStream_t s);

// LayerNorm over rows of D: y = ((x − mean)·rstd)·w_g + b_g, g = row % weight_rows (b may be null), math in fp32; dx =
// (+ residual where not null, which may be dx, rounded as `add` rounds), dw and db (may be null) += (fp32).
template <typename T> void layernorm_forward(T* y, const T* x, const T* w, const T* b, int64_t N, int64_t D, int64_t weight_rows, float eps, cudaStream_t s);
template <typename T> void layernorm_backward(T* dx, float* dw, float* db, const T* dy, const T* x, const T* w, const T* residual, int64_t N, int64_t D, int64_t weight_rows, float eps, cudaStream_t s);

// y[N, D] = x / max(‖x‖₂, 1e-12) per row (F.normalize); dx[N, D] (fp32) += the gradient of Σ dy·y (dy fp32).
template <typename T> void normalize_rows_forward(T* y, const T* x, int64_t N, int64_t D, cudaStream_t s);
template <typename T> void normalize_rows_backward(float* dx, const float* dy, const T* x, int64_t N, int64_t D, cudaStream_t s);

// Weightless RMS norm over rows of D (Llama 4's q/k L2 norm): y = x·rsqrt(mean(x²) + eps); dx =.
template <typename T> void rms_normalize_forward(T* y, const T* x, int64_t N, int64_t D, float eps, cudaStream_t s);
template <typename T> void rms_normalize_backward(T* dx, const T* dy, const T* x, int64_t N, int64_t D, float eps, cudaStream_t s);

// Llama 4's attention temperature, in place on x[tokens, width]: row t × (log1p(floor((t % seq + 1) / floor_scale))·
// attn_scale + 1); its own backward.
template <typename T> void attention_temperature(T* x, int64_t tokens, int64_t seq, int64_t width, float floor_scale, float attn_scale, cudaStream_t s);

// In-place RoPE on x[tokens, n_heads, head_dim], first rot_dim dims; pair i is (x[i], x[i + rot_dim/2]) (rotate_half)
// or, interleaved, (x[2i], x[2i+1]) (GLM), both with frequency column i of cos/sin; backward = transpose.
template <typename T> void rope_forward(T* x, const float* cos, const float* sin, const int32_t* positions, int64_t tokens, int64_t n_heads, int64_t head_dim, int64_t rot_dim, bool interleaved, cudaStream_t s);
template <typename T> void rope_backward(T* dx, const float* cos, const float* sin, const int32_t* positions, int64_t tokens, int64_t n_heads, int64_t head_dim, int64_t rot_dim, bool interleaved, cudaStream_t s);

// y = act(g)·u (silu: SwiGLU; gelu_tanh: GeGLU, torch's tanh approximation); dg, du =, and y = glu_forward's bits where
// the backward's y is not null. u null: y = act(g) (a non-gated MLP), dg = act'(g)·dy, du null. y, dy [rows, cols];
// g, u, dg, du rows ld ≥ cols apart (ld = 2·cols, u = g + cols: one [g | u] buffer).
template <typename T> void glu_forward(T* y, const T* g, const T* u, int64_t rows, int64_t cols, int64_t ld, Activation act, cudaStream_t s);
template <typename T> void glu_backward(T* dg, T* du, T* y, const T* dy, const T* g, const T* u, int64_t rows, int64_t cols, int64_t ld, Activation act, cudaStream_t s);

// GPT-OSS's clamped SwiGLU y = (clamp(u, ±limit) + 1)·g'·σ(alpha·g'), g' = min(g, limit); dg, du = (zero where
// clamped). Rows as glu_forward's.
template <typename T> void clamped_swiglu_forward(T* y, const T* g, const T* u, int64_t rows, int64_t cols, int64_t ld, float alpha, float limit, cudaStream_t s);
template <typename T> void clamped_swiglu_backward(T* dg, T* du, const T* dy, const T* g, const T* u, int64_t rows, int64_t cols, int64_t ld, float alpha, float limit, cudaStream_t s);

// Per-head concatenation y[t, h] = a[t, h] | b[t, h] (b[t] for every head where shared_b); backward da, db = dy's parts
// (shared_b: db summed over heads in order, fp32).
template <typename T> void head_concat_forward(T* y, const T* a, const T* b, int64_t tokens, int64_t H, int64_t a_dim, int64_t b_dim, bool shared_b, cudaStream_t s);
template <typename T> void head_concat_backward(T* da, T* db, const T* dy, int64_t tokens, int64_t H, int64_t a_dim, int64_t b_dim, bool shared_b, cudaStream_t s);

// Gated attention's output gate: y = x·σ(gate); dx, dgate = (dx may alias dy).
template <typename T> void sigmoid_gate_forward(T* y, const T* x, const T* gate, int64_t n, cudaStream_t s);
template <typename T> void sigmoid_gate_backward(T* dx, T* dgate, const T* dy, const T* x, const T* gate, int64_t n, cudaStream_t s);

// Gated DeltaNet (semantics as in backend.h): the depthwise causal conv1d + SiLU (kernel ≤ 8; dx =, dw += fp32), the
// gates from b | a (g, beta fp32), the gated delta rule (recurrent, state fp32; head dims ≤ 256) and the RMSNorm
// gated by silu(z) (dx, dz =, dw += fp32).
template <typename T> void causal_conv1d_forward(T* y, const T* x, const T* w, int64_t batch, int64_t seq, int64_t C, int64_t K, const int32_t* segments, cudaStream_t s);
template <typename T> void causal_conv1d_backward(T* dx, float* dw, const T* dy, const T* x, const T* w, int64_t batch, int64_t seq, int64_t C, int64_t K, const int32_t* segments, cudaStream_t s);
template <typename T> void deltanet_gates_forward(float* g, float* beta, const T* ba, const T* a_log, const T* dt_bias, int64_t T_, int64_t n, cudaStream_t s);
template <typename T> void deltanet_gates_backward(T* d_ba, float* d_a_log, float* d_dt_bias, const float* dg, const float* dbeta, const T* ba, const T* a_log, const T* dt_bias, int64_t T_, int64_t n, cudaStream_t s);
template <typename T> void gated_delta_rule_forward(T* o, const T* qkv, const float* g, const float* beta, const DeltaRuleShape& shape, cudaStream_t s);
template <typename T> void gated_delta_rule_backward(T* d_qkv, float* dg, float* dbeta, const T* d_o, const T* qkv, const float* g, const float* beta, const DeltaRuleShape& shape, cudaStream_t s);
// The gated delta rule in chunked (WY) form, the same semantics on tensor cores for bf16 (head dims <= 128:
// delta_rule_chunked_supports in backend/gated_delta_rule_scratch.h); the CUDA backend runs it where it applies
// unless the delta_rule switch picks the recurrent kernels above (to compare them).
template <typename T> void gated_delta_rule_chunked_forward(T* o, const T* qkv, const float* g, const float* beta, const DeltaRuleShape& shape, cudaStream_t s);
template <typename T> void gated_delta_rule_chunked_backward(T* d_qkv, float* dg, float* dbeta, const T* d_o, const T* qkv, const float* g, const float* beta, const DeltaRuleShape& shape, cudaStream_t s);
template <typename T> void gated_rmsnorm_forward(T* y, const T* x, const T* z, const T* w, int64_t N, int64_t D, float eps, cudaStream_t s);
template <typename T> void gated_rmsnorm_backward(T* dx, T* dz, float* dw, const T* dy, const T* x, const T* z, const T* w, int64_t N, int64_t D, float eps, cudaStream_t s);

// Lightning attention (MiniMax; semantics as in backend.h): recurrent, state fp32, head_dim <= 256, heads <= 256.
template <typename T> void lightning_attention_forward(T* o, const T* qkv, const LightningShape& shape, cudaStream_t s);
template <typename T> void lightning_attention_backward(T* d_qkv, const T* d_o, const T* qkv, const LightningShape& shape, cudaStream_t s);
// The same in chunks of 64 tokens (kernels/ops/lightning_attention_chunked.cu): bf16 on tensor cores, fp32 by FMA loops
// (slower than the recurrent kernel; the tests compare it), head_dim <= kLightningChunkedMaxHeadDim, heads <= 256
// (lightning_attention_chunked_supports); no scratch memory. The CUDA backend runs it for bf16 where it applies.
inline constexpr int64_t kLightningChunkedMaxHeadDim = 128;
bool lightning_attention_chunked_supports(const LightningShape& shape);
template <typename T> void lightning_attention_chunked_forward(T* o, const T* qkv, const LightningShape& shape, cudaStream_t s);
template <typename T> void lightning_attention_chunked_backward(T* d_qkv, const T* d_o, const T* qkv, const LightningShape& shape, cudaStream_t s);

// y += x; y *= alpha; y = y_scale·y + x_scale·x.
template <typename T> void add(T* y, const T* x, int64_t n, cudaStream_t s);
template <typename T> void add_scaled(T* y, const T* x, float x_scale, float y_scale, int64_t n, cudaStream_t s);
template <typename T> void scale(T* y, float alpha, int64_t n, cudaStream_t s);
// y[t, o] += b[o]; db[o] += Σ_t dy[t, o] (fp32, deterministic).
template <typename T> void bias_forward(T* y, const T* b, int64_t tokens, int64_t O, cudaStream_t s);
template <typename T> void bias_backward(float* db, const T* dy, int64_t tokens, int64_t O, float scale, cudaStream_t s);

// Flash-style attention (never materialises S×S): causal, GQA, sliding window, per-sequence valid lengths
// (no work on padding), packed segments, logit scale, soft-capping, ALiBi (slopes in device memory); semantics exactly
// as AttnShape in backend.h; lse fp32 (of the final logits, and of the sink where AttnShape::sinks); head_dim 1..256.
// attention_sinks_backward (kernels/attention/attention_sinks.cu): d_sinks[h] += −Σ_i exp(sink_h − lse_i)·(dout_i·out_i).
template <typename T> void attention_forward(T* out, float* lse, const T* q, const T* k, const T* v, const AttnShape& shape, cudaStream_t s);
template <typename T> void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out, const float* lse, const AttnShape& shape, cudaStream_t s);
template <typename T> void attention_sinks_backward(float* d_sinks, const T* dout, const T* out, const float* lse, const AttnShape& shape, cudaStream_t s);

// Cross-entropy on one chunk of fp32 logits [rows, V], rows ld >= V elements apart, dlogits alike (its columns from V to
// ld untouched; in place allowed for dlogits when T = float), each logit x first
// soft-capped to z = softcap·tanh(x/softcap) where softcap > 0 (z = x otherwise):
// row_loss[r] = logsumexp(z) − z[target] (0 where target == -100); dlogits = scale·row_weight[r]·(softmax(z) −
// onehot)·∂z/∂x (row_weight [rows] null: 1), 0 on ignored rows; a target outside [0, V) other than -100 gives NaN
// loss and gradient for its row.
template <typename T> void cross_entropy(T* dlogits, float* row_loss, const float* logits, const int32_t* targets, const float* row_weight, int64_t rows, int64_t V, int64_t ld, float scale, float softcap, cudaStream_t s);

// Mixture of experts (kernels/ops/moe.cu), semantics of the Backend ops of the same names; probs, weights, d_weights,
// aux_grad, prob_sums fp32; counts, idx, offsets [E+1], source, row_of int32.
template <typename T> void moe_route_forward(float* probs, int32_t* idx, float* weights, const T* logits, int64_t tokens, const MoeRouting& r, cudaStream_t s);
template <typename T> void moe_route_backward(T* d_logits, const float* d_weights, const float* probs, const int32_t* idx, const float* weights, const float* aux_grad, const int32_t* seq_lens, int64_t seq, int64_t tokens, const MoeRouting& r, cudaStream_t s);
void moe_router_stats(int32_t* counts, float* prob_sums, const float* probs, const int32_t* idx, const int32_t* seq_lens, int64_t seq, int64_t tokens, int64_t E, int64_t k, cudaStream_t s);
void moe_permute(int32_t* offsets, int32_t* source, int32_t* row_of, const int32_t* idx, int64_t tokens, int64_t E, int64_t k, cudaStream_t s);
template <typename T> void moe_gather(T* xs, const T* x, const int32_t* source, int64_t rows, int64_t k, int64_t H, cudaStream_t s);
template <typename T> void moe_gather_backward(T* dx, const T* dxs, const int32_t* row_of, int64_t tokens, int64_t k, int64_t H, bool accumulate, cudaStream_t s);
template <typename T> void moe_combine_forward(T* y, const T* ys, const float* weights, const int32_t* row_of, int64_t tokens, int64_t k, int64_t H, cudaStream_t s);
template <typename T> void moe_combine_weights_backward(T* u, float* d_weights, const T* act, const float* weights, const int32_t* source, const int32_t* idx, const T* dy, const T* down_bias, int64_t rows, int64_t k, int64_t I, int64_t H, cudaStream_t s);
// Llama 4's expert input: xs[r] *= weights[source[r]]; backward d_weights[source[r]] = x[source[r] / k]·dxs[r] (fp32),
// dxs[r] *= weights[source[r]] (kernels/ops/moe_scale_rows.cu).
template <typename T> void moe_scale_rows_forward(T* xs, const float* weights, const int32_t* source, int64_t rows, int64_t H, cudaStream_t s);
template <typename T> void moe_scale_rows_backward(T* dxs, float* d_weights, const T* x, const float* weights, const int32_t* source, int64_t rows, int64_t k, int64_t H, cudaStream_t s);
// Per-expert bias of grouped rows (kernels/ops/grouped_bias.cu): y[r] += b_e (b + e·b_stride); db_e += Σ rows (fp32).
template <typename T> void grouped_bias_forward(T* y, const T* b, int64_t b_stride, const int32_t* offsets, int64_t E, int64_t R, int64_t O, cudaStream_t s);
template <typename T> void grouped_bias_backward(float* db, const T* dy, int64_t b_stride, const int32_t* offsets, int64_t E, int64_t R, int64_t O, cudaStream_t s);
template <typename T> void row_sigmoid_gate_forward(T* y, const T* x, const T* g, int64_t tokens, int64_t H, cudaStream_t s);
template <typename T> void row_sigmoid_gate_backward(T* dx, T* dg, const T* dy, const T* x, const T* g, int64_t tokens, int64_t H, cudaStream_t s);

// out[0] = Σ x² (fp64, deterministic); out[0] = Σ x (fp64) over n floats.
void sum_squares(double* out, const float* x, int64_t n, cudaStream_t s);
void sum(double* out, const float* x, int64_t n, cudaStream_t s);

// host_mapped[0, bytes) = src[0, bytes): one block's stores into mapped page-locked host memory (no copy engine).
void store_to_host(void* host_mapped, const void* src, int64_t bytes, cudaStream_t s);

// y = (Tout) x; y += x (fp32).
template <typename Tout, typename Tin> void cast(Tout* y, const Tin* x, int64_t n, cudaStream_t s);
void accumulate(float* y, const float* x, int64_t n, cudaStream_t s);

// p, m, v ← AdamW's p', m', v' over n floats in place, and copy = bf16(p') where copy is not null (kernels/ops/adamw.cu):
// bitwise the host's adamw_update with the same coefficients.
void adamw_update(float* p, float* m, float* v, const float* g, __nv_bfloat16* copy, int64_t n,
                  const AdamWCoefficients& c, cudaStream_t s);

}  // namespace mt::cuda
