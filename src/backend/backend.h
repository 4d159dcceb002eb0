// The op interface every backend implements (cpu/ is the reference; cuda/ joins later).
// Invariant: ops are stateless functions over memory the backend owns; row-major; T = batch*seq tokens,
// batch-major. "+=" outputs accumulate, "=" outputs overwrite. fp32 activations and accumulators (core/real.h: fp64 in
// the CPU reference's fp64 build).
#pragma once
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "backend/segment_batch.h"
#include "core/activation.h"
#include "core/dtype.h"
#include "core/real.h"

namespace mt {

// The rates of the device a backend runs on, as its probe measured them (plan/step_rates.h turns them into the
// plan's StepRates): a layer-sized bf16 GEMM's FLOP/s and page-locked host-to-device and device-to-host bytes/s.
struct DeviceRates {
  double gemm_flops = 0, h2d_bytes = 0, d2h_bytes = 0;
};

// Geometry of one attention call over a right-padded batch.
struct AttnShape {
  int64_t batch = 0, seq = 0;            // T = batch * seq
  int64_t n_heads = 0, n_kv_heads = 0, head_dim = 0;  // head_dim: of q and k
  int64_t v_head_dim = 0;                // of v and out; 0 = head_dim (multi-head latent attention: 128 with q/k 192)
  int64_t window = 0;                    // sliding window: query i sees keys j with i - window < j <= i; 0 = none
  float scale = 0.0f;                    // logit scale; 0 = 1/sqrt(head_dim)
  float softcap = 0.0f;                  // logits s -> softcap·tanh(s/softcap) (Gemma 2); 0 = none
  const real* alibi_slopes = nullptr;    // [n_heads] fp32 backend memory: logit += slope_h·(j − i) (ALiBi); null = none
  const int32_t* seq_lens = nullptr;     // [batch] valid tokens per sequence; nullptr = all valid
  const int32_t* segments = nullptr;     // [T] packed-example id; keys only from the query's segment; nullptr = one
  // The same segments as a virtual padded batch (segment_batch.h; host memory, set with segments by the engine) for
  // implementations without a segment mask; those with one ignore it.
  const SegmentBatch* segment_batch = nullptr;
  const void* sinks = nullptr;           // [n_heads] of dtype(): a per-head logit in every row's softmax denominator
                                         // with no value (GPT-OSS attention sinks); lse includes it; null = none
  int64_t value_head_dim() const { return v_head_dim > 0 ? v_head_dim : head_dim; }
};

// Geometry of one gated-delta-rule call over a right-padded batch. qkv rows hold q [n_k_heads·k_head_dim] | k
// [n_k_heads·k_head_dim] | v [n_v_heads·v_head_dim]; v head h reads k head h / (n_v_heads / n_k_heads); g, beta
// [T, n_v_heads] fp32; o [T, n_v_heads·v_head_dim].
struct DeltaRuleShape {
  int64_t batch = 0, seq = 0;            // T = batch * seq
  int64_t n_k_heads = 0, n_v_heads = 0, k_head_dim = 0, v_head_dim = 0;
  const int32_t* seq_lens = nullptr;     // [batch] valid tokens per sequence; nullptr = all valid
  const int32_t* segments = nullptr;     // [T] packed-example id; the state restarts at zero where it changes
  int64_t key_dim() const { return n_k_heads * k_head_dim; }
  int64_t value_dim() const { return n_v_heads * v_head_dim; }
  int64_t row() const { return 2 * key_dim() + value_dim(); }
};

// Geometry of one lightning-attention call (MiniMax) over a right-padded batch. qkv rows hold per head h, at h·3·head_dim,
// its raw q | k | v of head_dim each (qkv_proj's output, before the SiLU the op applies); o [T, n_heads·head_dim].
// Head h decays by λ_h = 2^(−8(h + 1)/n_heads)·decay_factor per token (lightning_decay_rate).
struct LightningShape {
  int64_t batch = 0, seq = 0;            // T = batch * seq
  int64_t n_heads = 0, head_dim = 0;
  double decay_factor = 1.0;
  const int32_t* seq_lens = nullptr;     // [batch] valid tokens per sequence; nullptr = all valid
  const int32_t* segments = nullptr;     // [T] packed-example id; the state restarts at zero where it changes
  int64_t row() const { return 3 * n_heads * head_dim; }
  int64_t width() const { return n_heads * head_dim; }
};
// λ_h in fp32 as transformers' get_slope_rate computes it (its buffers are fp32).
inline float lightning_decay_rate(int64_t head, int64_t n_heads, double decay_factor) {
  const double base = 1.0 / std::pow(2.0, 8.0 / static_cast<double>(n_heads));
  return static_cast<float>(static_cast<float>(std::pow(base, static_cast<double>(head + 1))) * decay_factor);
}

// How an MoE router picks and weighs its experts (backend.h's moe_route_* ops).
struct MoeRouting {
  int64_t experts = 0, top_k = 0;
  bool sigmoid = false;               // false: softmax over all experts; true: sigmoid scores, grouped selection
  bool norm_topk = false;
  float scaling = 1.0f;               // weights × scaling (not with topk_softmax)
  int64_t groups = 1, topk_groups = 1;  // expert groups and how many of them a token may use (not with topk_softmax)
  const void* score_bias = nullptr;   // sigmoid: [E] of dtype(), added to the scores for the selection only; may be null
  bool topk_softmax = false;          // softmax kind: pick the top k of the logits, weights = softmax of those k (GPT-OSS)
};

// Tensors named x, y, q, k, v, out, gate, up, dx, dy, ... and weights w, b, table hold elements of dtype()
// (fp32 on the CPU reference; bf16 or fp32 on CUDA). dw, db, dtable, lse, cos, sin and every other real* are mt::real:
// fp32 ("fp32" below), fp64 in the CPU reference's fp64 build (core/real.h), whose dtype() is then f64.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // The device the ops run on, as its driver names it ("NVIDIA H100 80GB HBM3"); the backend's name where none.
  virtual std::string device_name() const { return name(); }
  virtual DType dtype() const = 0;  // element type of activations and of the weights the ops read
  virtual bool host_memory() const = 0;  // true when backend memory is ordinary host memory (CPU backend)

  // Memory the ops run on (host memory on the CPU backend, device memory on CUDA).
  virtual void* alloc_bytes(int64_t bytes) = 0;
  virtual void free_bytes(void* p) = 0;
  void* alloc(int64_t n) { return alloc_bytes(n * static_cast<int64_t>(dtype_size(dtype()))); }  // n of dtype()
  real* alloc_reals(int64_t n) { return static_cast<real*>(alloc_bytes(n * static_cast<int64_t>(sizeof(real)))); }
  // Host ↔ backend memory and backend → backend copies, in bytes; download returns when the data has landed.
  virtual void upload(void* dst, const void* host_src, int64_t bytes) = 0;
  virtual void download(void* host_dst, const void* src, int64_t bytes) = 0;
  virtual void copy_bytes(void* dst, const void* src, int64_t bytes) = 0;
  virtual void zero_bytes(void* p, int64_t bytes) = 0;
  // Waits until every op issued so far has finished (host-visible results).
  virtual void synchronize() = 0;
  // Most backend memory held at once so far (bytes), and the memory the device has in all (0 when unknown).
  virtual int64_t peak_memory_bytes() const = 0;
  virtual int64_t device_memory_bytes() const = 0;
  // The bytes the memory plan reserved for attention's library workspace (GpuPlan::attention_workspace): the CUDA
  // backend's cuDNN attention holds itself to it under MEGATRAIN_ATTENTION=auto (plan/cudnn_attention_plan.h).
  // Without a call: no limit (op tests). Other backends have no such workspace.
  virtual void set_attention_workspace(int64_t /*bytes*/) {}
  // Measures the device's rates (CUDA: kernels/runtime/rate_probe.h, well under a second); none where backend memory
  // is host memory (the CPU backend), whose plan decides nothing by them.
  virtual std::optional<DeviceRates> measure_rates() { return std::nullopt; }

  // y[T,O] = x[T,I] · w[O,I]ᵀ + b[O] (b may be null).
  virtual void linear_forward(void* y, const void* x, const void* w, const void* b, int64_t T, int64_t I,
                              int64_t O) = 0;
  // y[T,O] = scale·(x·wᵀ + b) + residual[T,O] (residual does not alias y): the residual connection in the
  // projection's pass, scale a residual multiplier (Granite; 1 elsewhere). On CUDA without a bias it is the GEMM's
  // alpha and epilogue input, one rounding of the fp32 sum.
  virtual void linear_forward_add(void* y, const void* x, const void* w, const void* b, const void* residual, int64_t T,
                                  int64_t I, int64_t O, float scale) = 0;
  // The backward of y = x·wᵀ + b reached by dy_scale·dy (a residual multiplier's gradient, scaled in the GEMMs'
  // alpha; 1 elsewhere): dx[T,I] = dy_scale·dy·w (or += when accumulate_dx; dx may be null), dw[O,I] +=
  // dy_scale·dyᵀ·x (dw may be null: x is then not read), db[O] += dy_scale·Σ dy (db may be null).
  virtual void linear_backward(void* dx, real* dw, real* db, const void* dy, const void* x, const void* w,
                               int64_t T, int64_t I, int64_t O, bool accumulate_dx, float dy_scale) = 0;

  // y[T,H] = table[ids[t]]; dtable[ids[t]] += dy[t]. ids are checked in range by the data module.
  virtual void embedding_forward(void* y, const void* table, const int32_t* ids, int64_t T, int64_t H) = 0;
  virtual void embedding_backward(real* dtable, const void* dy, const int32_t* ids, int64_t T, int64_t H) = 0;

  // y = x · rsqrt(mean(x²) + eps) · (w + weight_offset) over rows of D (HF LlamaRMSNorm with offset 0, Gemma's
  // (1+w)·x̂ with offset 1); dx =, dw +=.
  virtual void rmsnorm_forward(void* y, const void* x, const void* w, int64_t N, int64_t D, float eps,
                               float weight_offset) = 0;
  virtual void rmsnorm_backward(void* dx, real* dw, const void* dy, const void* x, const void* w, int64_t N,
                                int64_t D, float eps, float weight_offset) = 0;
  // y = x̂·w with the product formed in fp32 and rounded once to dtype() (OLMo 2/3's (w·x̂).to(dtype)), where
  // rmsnorm_forward rounds x̂ first (LlamaRMSNorm); the two differ only below fp32. Its backward is rmsnorm_backward's.
  virtual void rmsnorm_forward_fp32_product(void* y, const void* x, const void* w, int64_t N, int64_t D,
                                            float eps) = 0;
  // rmsnorm_backward with the residual branch's gradient added: dx = ∂ + residual (bitwise rmsnorm_backward, then
  // add(dx, residual)), in one pass over dx; residual may be dx itself (a parallel-residual layer's dy).
  virtual void rmsnorm_backward_add(void* dx, real* dw, const void* dy, const void* x, const void* w,
                                    const void* residual, int64_t N, int64_t D, float eps, float weight_offset) = 0;

  // LayerNorm over rows of D (nn.LayerNorm, CohereLayerNorm): y = (x − mean)·rsqrt(var + eps)·w_g + b_g, var the
  // biased variance, g = row % weight_rows (1 for a hidden-size norm; n_heads for Cohere's per-head q/k norm with a
  // weight per head, w and b [weight_rows, D]); b may be null (no bias). backward: dx = ∂ (+ residual where not null,
  // the residual add in the same pass; residual may be dx itself), dw and db (null without a bias) += in fp32. N is a
  // multiple of weight_rows.
  virtual void layernorm_forward(void* y, const void* x, const void* w, const void* b, int64_t N, int64_t D,
                                 int64_t weight_rows, float eps) = 0;
  virtual void layernorm_backward(void* dx, real* dw, real* db, const void* dy, const void* x, const void* w,
                                  const void* residual, int64_t N, int64_t D, int64_t weight_rows, float eps) = 0;

  // y[N,D] = x / max(‖x‖₂, 1e-12) per row (torch.nn.functional.normalize; Baichuan's normalised LM head);
  // backward: dx[N,D] += ∂/∂x of Σ dy·y, dy and dx fp32.
  virtual void normalize_rows_forward(void* y, const void* x, int64_t N, int64_t D) = 0;
  virtual void normalize_rows_backward(real* dx, const real* dy, const void* x, int64_t N, int64_t D) = 0;

  // Weightless RMS normalisation over rows of D (Llama 4's q/k Llama4TextL2Norm): y = x · rsqrt(mean(x²) + eps);
  // dx = (∂y/∂x)ᵀ·dy.
  virtual void rms_normalize_forward(void* y, const void* x, int64_t N, int64_t D, float eps) = 0;
  virtual void rms_normalize_backward(void* dx, const void* dy, const void* x, int64_t N, int64_t D, float eps) = 0;

  // Attention temperature tuning (Llama 4's NoPE layers), in place on x[T, width]: row t × (log1p(floor((p + 1) /
  // floor_scale))·attn_scale + 1) with p = t % seq, each step in fp32 as transformers computes it. A diagonal map:
  // its backward is the same call on the gradient.
  virtual void attention_temperature(void* x, int64_t T, int64_t seq, int64_t width, float floor_scale,
                                     float attn_scale) = 0;

  // In-place rotary embedding on x[T, n_heads, head_dim] on the first rot_dim dims; cos/sin are
  // [max_pos, rot_dim/2] tables (frequency i at column i), positions [T]. Pair i is (x[i], x[i + rot_dim/2])
  // (HF rotate_half) or, when interleaved, (x[2i], x[2i+1]) (GLM). backward applies the transpose rotation.
  virtual void rope_forward(void* x, const real* cos, const real* sin, const int32_t* positions, int64_t T,
                            int64_t n_heads, int64_t head_dim, int64_t rot_dim, bool interleaved) = 0;
  virtual void rope_backward(void* dx, const real* cos, const real* sin, const int32_t* positions, int64_t T,
                             int64_t n_heads, int64_t head_dim, int64_t rot_dim, bool interleaved) = 0;

  // Causal (optionally windowed, segmented) softmax attention, GQA. Logit of query i, key j:
  // s = scale·q·k, then s = softcap·tanh(s/softcap) where softcap > 0, then s += slope_h·(j − i) where ALiBi.
  // q [T, n_heads*head_dim], out [T, n_heads*v_head_dim]; k [T, n_kv_heads*head_dim], v [T, n_kv_heads*v_head_dim]; lse [batch, n_heads, seq] (log-sum-exp saved
  // for backward). Rows at padded positions produce zeros. backward: dq, dk, dv =.
  virtual void attention_forward(void* out, real* lse, const void* q, const void* k, const void* v,
                                 const AttnShape& shape) = 0;
  virtual void attention_backward(void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k,
                                  const void* v, const void* out, const real* lse, const AttnShape& shape) = 0;
  // The sinks' gradient (shape.sinks set): d_sinks[h] += −Σ over valid rows i of exp(sink_h − lse_i)·(dout_i·out_i),
  // summed in (batch, position) order (fp32). The sink has no value, so attention_backward is unchanged by it.
  virtual void attention_sinks_backward(real* d_sinks, const void* dout, const void* out, const real* lse,
                                        const AttnShape& shape) = 0;

  // Per-head concatenation (multi-head latent attention's queries and keys): y[t, h] = a[t, h] (a_dim values) |
  // b[t, h] (b_dim values), y [T, H·(a_dim + b_dim)], a [T, H·a_dim], b [T, H·b_dim], or with shared_b one b [T, b_dim]
  // for every head. backward: da, db = the parts of dy (shared_b: db[t] = Σ over heads of dy's b parts, heads in
  // order, fp32).
  virtual void head_concat_forward(void* y, const void* a, const void* b, int64_t T, int64_t H, int64_t a_dim,
                                   int64_t b_dim, bool shared_b) = 0;
  virtual void head_concat_backward(void* da, void* db, const void* dy, int64_t T, int64_t H, int64_t a_dim,
                                    int64_t b_dim, bool shared_b) = 0;

  // y = act(gate) · up elementwise over rows × cols (silu: SwiGLU; gelu_tanh: GeGLU with torch's tanh approximation);
  // dgate, dup =, and, where y is not null, y = glu_forward's bits from the same pass (a backward that did not keep
  // the activation gets it without another pass over gate and up). y and dy are [rows, cols]; gate, up, dgate and dup
  // rows lie ld ≥ cols elements apart (ld = cols: dense; ld = 2·cols with up = gate + cols: one [rows, 2·cols]
  // buffer whose row is [gate | up], as one GEMM of the stacked [W_gate; W_up] writes it). up null: the non-gated
  // activation y = act(gate) (StarCoder2's MLP), dgate = act'(gate)·dy, dup null.
  virtual void glu_forward(void* y, const void* gate, const void* up, int64_t rows, int64_t cols, int64_t ld,
                           Activation act) = 0;
  virtual void glu_backward(void* dgate, void* dup, void* y, const void* dy, const void* gate, const void* up,
                            int64_t rows, int64_t cols, int64_t ld, Activation act) = 0;

  // GPT-OSS's clamped SwiGLU: g = min(gate, limit), u = clamp(up, −limit, limit), y = (u + 1)·g·σ(alpha·g);
  // backward dgate, dup = (zero where the clamp holds the input, as torch.clamp's gradient). Rows as glu_forward's:
  // y, dy [rows, cols]; gate, up, dgate, dup rows ld apart.
  virtual void clamped_swiglu_forward(void* y, const void* gate, const void* up, int64_t rows, int64_t cols,
                                      int64_t ld, float alpha, float limit) = 0;
  virtual void clamped_swiglu_backward(void* dgate, void* dup, const void* dy, const void* gate, const void* up,
                                       int64_t rows, int64_t cols, int64_t ld, float alpha, float limit) = 0;

  // Sigmoid output gate (Qwen3.5 attention): y = x·σ(gate); dx, dgate = (dx may alias dy).
  virtual void sigmoid_gate_forward(void* y, const void* x, const void* gate, int64_t n) = 0;
  virtual void sigmoid_gate_backward(void* dx, void* dgate, const void* dy, const void* x, const void* gate,
                                     int64_t n) = 0;

  // Depthwise causal conv1d + SiLU over x[T, C] (batch × seq tokens): y[t, c] = silu(Σ_j w[c, j]·x[t − K + 1 + j, c]),
  // w [C, K] (HF Conv1d weight [C, 1, K]); taps before the token's sequence start or in another packed segment
  // (segments may be null) read zero. backward: dx =, dw +=.
  virtual void causal_conv1d_forward(void* y, const void* x, const void* w, int64_t batch, int64_t seq, int64_t C,
                                     int64_t K, const int32_t* segments) = 0;
  virtual void causal_conv1d_backward(void* dx, real* dw, const void* dy, const void* x, const void* w,
                                      int64_t batch, int64_t seq, int64_t C, int64_t K, const int32_t* segments) = 0;

  // Gated DeltaNet gates from ba[T, 2n] (b | a per token): beta = σ(b), g = −exp(A_log)·softplus(a + dt_bias)
  // (fp32 [T, n] each); backward: d_ba =, d_a_log and d_dt_bias += (fp32).
  virtual void deltanet_gates_forward(real* g, real* beta, const void* ba, const void* a_log, const void* dt_bias,
                                      int64_t T, int64_t n) = 0;
  virtual void deltanet_gates_backward(void* d_ba, real* d_a_log, real* d_dt_bias, const real* dg,
                                       const real* dbeta, const void* ba, const void* a_log, const void* dt_bias,
                                       int64_t T, int64_t n) = 0;

  // The gated delta rule with q and k L2-normalised (x·rsqrt(Σx² + 1e-6)) and q scaled by 1/sqrt(k_head_dim), per
  // sequence, v head and token t: S ← exp(g_t)·S; S ← S + k_t·(β_t·(v_t − Sᵀk_t))ᵀ; o_t = Sᵀq_t, S [k_head_dim,
  // v_head_dim] fp32 starting at zero for every sequence and packed segment; padded tokens give o = 0 and no
  // gradient. backward: d_qkv (∂ wrt the raw q, k, v) =, dg, dbeta =.
  virtual void gated_delta_rule_forward(void* o, const void* qkv, const real* g, const real* beta,
                                        const DeltaRuleShape& shape) = 0;
  virtual void gated_delta_rule_backward(void* d_qkv, real* dg, real* dbeta, const void* d_o, const void* qkv,
                                         const real* g, const real* beta, const DeltaRuleShape& shape) = 0;

  // RMSNorm gated by silu(z) (Qwen3.5's RMSNormGated, norm before gate): y = w·x̂·silu(z) over rows of D,
  // x̂ = x·rsqrt(mean(x²) + eps); dx, dz =, dw +=.
  virtual void gated_rmsnorm_forward(void* y, const void* x, const void* z, const void* w, int64_t N, int64_t D,
                                     float eps) = 0;
  virtual void gated_rmsnorm_backward(void* dx, void* dz, real* dw, const void* dy, const void* x, const void* z,
                                      const void* w, int64_t N, int64_t D, float eps) = 0;

  // Lightning attention (MiniMax), per sequence, head and token, with q, k, v = silu(raw): S ← exp(−λ_h)·S + k·vᵀ,
  // o = Sᵀq, S [head_dim, head_dim] fp32 starting at zero for every sequence and packed segment; padded tokens give
  // o = 0 and no gradient. backward: d_qkv (∂ wrt the raw q, k, v) =.
  virtual void lightning_attention_forward(void* o, const void* qkv, const LightningShape& shape) = 0;
  virtual void lightning_attention_backward(void* d_qkv, const void* d_o, const void* qkv,
                                            const LightningShape& shape) = 0;

  // y += x; y *= alpha; y = y_scale·y + x_scale·x (n elements of dtype()).
  virtual void add(void* y, const void* x, int64_t n) = 0;
  virtual void add_scaled(void* y, const void* x, float x_scale, float y_scale, int64_t n) = 0;
  virtual void scale(void* y, float alpha, int64_t n) = 0;

  // Fused, chunked LM head + cross-entropy: logits = x[T,H]·w[V,H]ᵀ are never held for all T at once; where
  // softcap > 0 they become softcap·tanh(logits/softcap) before the softmax (Gemma 2's final soft-capping).
  // Returns Σ CE over tokens whose target != -100 (fp64). dx[T,H] = grad_scale · ∂Σ/∂x, dw[V,H] += grad_scale · ∂Σ/∂w.
  // dx and dw both null: the loss only (evaluation), no gradient computed.
  double head_loss(void* dx, real* dw, const void* x, const void* w, const int32_t* targets, int64_t T, int64_t H,
                   int64_t V, float grad_scale, float softcap) {
    return head_loss_rows(dx, dw, x, w, targets, nullptr, nullptr, T, H, V, grad_scale, softcap);
  }
  // head_loss with per-row terms (preference training's per-sequence log-probabilities and their weights):
  // row_weight [T] fp32 backend memory (null = every row 1) weighs each row's CE in the gradient, dx = grad_scale ·
  // ∂(Σ row_weight·CE)/∂x and dw += grad_scale · ∂(Σ row_weight·CE)/∂w; row_loss [T] fp32 backend memory (null = not
  // written) receives each row's CE, 0 where the target is −100. Returns the unweighted Σ CE.
  virtual double head_loss_rows(void* dx, real* dw, const void* x, const void* w, const int32_t* targets,
                                const real* row_weight, real* row_loss, int64_t T, int64_t H, int64_t V,
                                float grad_scale, float softcap) = 0;

  // Mixture of experts over T tokens, E experts, k experts per token; R = T·k routed rows. `seq_lens` (null = all
  // valid) with `seq` marks the valid tokens of a batch-major [batch, seq] layout (token t: t % seq < seq_lens[t / seq]).
  // Router, softmax kind: probs[T,E] = softmax(logits) (fp32); idx[T,k] the k largest probabilities, largest first
  // (ties to the lower expert), with groups > 1 among the experts of the topk_groups groups whose largest probability
  // is highest (DeepSeek-V2's group_limited_greedy; ties to the lower group); weights[T,k] their probabilities,
  // divided by their sum where norm_topk, × scaling. With
  // topk_softmax: idx the k largest logits (largest first, ties to the lower expert), weights[T,k] the softmax
  // over those k logits; probs as above (the load-balancing loss reads them).
  // Sigmoid kind (MoeRouting::sigmoid): probs = sigmoid(logits); the k largest of probs + score_bias among the
  // experts of the topk_groups groups (of E / groups experts) whose two largest biased scores sum highest (ties to
  // the lower group); weights their unbiased probs, / (sum + 1e-20) where norm_topk, × scaling.
  virtual void moe_route_forward(real* probs, int32_t* idx, real* weights, const void* logits, int64_t T,
                                 const MoeRouting& r) = 0;
  // d_logits[T,E] = ∂/∂logits of Σ d_weights·weights + Σ_{valid t, e} aux_grad[e]·probs[t,e] (aux_grad [E] may be
  // null: no auxiliary loss; always null for the sigmoid kind), the selection held fixed.
  virtual void moe_route_backward(void* d_logits, const real* d_weights, const real* probs, const int32_t* idx,
                                  const real* weights, const real* aux_grad, const int32_t* seq_lens, int64_t seq,
                                  int64_t T, const MoeRouting& r) = 0;
  // The load-balancing loss's statistics over the valid tokens: counts[E] += rows routed to each expert,
  // prob_sums[E] += Σ_t probs[t,e] (summed in token order).
  virtual void moe_router_stats(int32_t* counts, real* prob_sums, const real* probs, const int32_t* idx,
                                const int32_t* seq_lens, int64_t seq, int64_t T, int64_t E, int64_t k) = 0;
  // Stable grouping of the routed rows by expert: offsets[E+1] (expert e's rows are [offsets[e], offsets[e+1])),
  // source[R] (grouped row r holds routed row t·k + j, rows of one expert in token order), row_of[T·k] its inverse.
  virtual void moe_permute(int32_t* offsets, int32_t* source, int32_t* row_of, const int32_t* idx, int64_t T,
                           int64_t E, int64_t k) = 0;
  // xs[r,H] = x[source[r] / k]; backward: dx[t] = (or += when accumulate) Σ_j dxs[row_of[t·k + j]], j in order.
  virtual void moe_gather(void* xs, const void* x, const int32_t* source, int64_t R, int64_t k, int64_t H) = 0;
  virtual void moe_gather_backward(void* dx, const void* dxs, const int32_t* row_of, int64_t T, int64_t k, int64_t H,
                                   bool accumulate) = 0;
  // y[t,H] = Σ_j weights[t,j]·ys[row_of[t·k + j]], j in order.
  virtual void moe_combine_forward(void* y, const void* ys, const real* weights, const int32_t* row_of, int64_t T,
                                   int64_t k, int64_t H) = 0;
  // The combine's backward without the expert outputs ys = act·w_downᵀ (+ b_down), so that a backward need not
  // recompute the down projection. Given u[R,I] = dy[source[r] / k]·w_down_e, the down projection's data gradient of
  // the unweighted output gradient, and the activations act[R,I]: d_weights[source[r]] = u[r]·act[r]
  // (+ dy[source[r] / k]·b_e where down_bias [E, H] is given, e = idx[source[r]]), fp32; then, in place,
  // u[r] *= weights[source[r]]: the activations' gradient.
  virtual void moe_combine_weights_backward(void* u, real* d_weights, const void* act, const real* weights,
                                            const int32_t* source, const int32_t* idx, const void* dy,
                                            const void* down_bias, int64_t R, int64_t k, int64_t I, int64_t H) = 0;
  // Grouped linear: rows [offsets[e], offsets[e+1]) of x[R,I] times expert e's w_e[O,I] (w + e·w_stride elements):
  // y = x·w_eᵀ. offsets [E+1] in host memory. Backward: dx = (or += when accumulate_dx) dy·w_e, dw_e += dyᵀ·x
  // (dw + e·w_stride, fp32). An expert without rows is skipped.
  virtual void grouped_linear_forward(void* y, const void* x, const void* w, int64_t w_stride, const int64_t* offsets,
                                      int64_t E, int64_t I, int64_t O) = 0;
  virtual void grouped_linear_backward(void* dx, real* dw, const void* dy, const void* x, const void* w,
                                       int64_t w_stride, const int64_t* offsets, int64_t E, int64_t I, int64_t O,
                                       bool accumulate_dx) = 0;
  // Routed rows scaled by their routing weights (Llama 4 scales the expert's input): xs[r,H] *= weights[source[r]];
  // backward, in place on dxs: d_weights[source[r]] = x[source[r] / k]·dxs[r] (fp32, every routed row written), then
  // dxs[r] *= weights[source[r]].
  virtual void moe_scale_rows_forward(void* xs, const real* weights, const int32_t* source, int64_t R, int64_t H) = 0;
  virtual void moe_scale_rows_backward(void* dxs, real* d_weights, const void* x, const real* weights,
                                       const int32_t* source, int64_t R, int64_t k, int64_t H) = 0;
  // Per-expert bias of grouped rows: y[r, O] += b_e[O] for rows r of expert e (b + e·b_stride); offsets [E+1] in
  // backend memory (moe_permute's). Backward: db_e[O] += Σ of dy over expert e's rows, in row order (fp32).
  virtual void grouped_bias_forward(void* y, const void* b, int64_t b_stride, const int32_t* offsets, int64_t E,
                                    int64_t R, int64_t O) = 0;
  virtual void grouped_bias_backward(real* db, const void* dy, int64_t b_stride, const int32_t* offsets, int64_t E,
                                     int64_t R, int64_t O) = 0;
  // y[t,H] += sigmoid(g[t])·x[t] (Qwen2-MoE's shared-expert gate, g [T]); backward: dx[t] = sigmoid(g[t])·dy[t],
  // dg[t] = sigmoid'(g[t])·(x[t]·dy[t]).
  virtual void row_sigmoid_gate_forward(void* y, const void* x, const void* g, int64_t T, int64_t H) = 0;
  virtual void row_sigmoid_gate_backward(void* dx, void* dg, const void* dy, const void* x, const void* g, int64_t T,
                                     int64_t H) = 0;

  // Σ x² in fp64 over n fp32 values.
  virtual double sum_squares(const real* x, int64_t n) = 0;

  // Device time per op since the start, where the backend measures it (CUDA with MEGATRAIN_PROFILE_OPS=1): a
  // printable table; empty otherwise.
  virtual std::string op_profile() { return {}; }
};

std::unique_ptr<Backend> make_cpu_backend();

}  // namespace mt
