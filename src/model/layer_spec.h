// LayerSpec: what one decoder layer computes — its token mixer (attention, multi-head latent attention, Gated
// DeltaNet or lightning attention), its feed-forward (a
// gated MLP or a mixture of experts) and where its norms sit. ModelSpec holds one per layer; blocks (src/engine/)
// size and run themselves from it.
// Invariant: a LayerSpec in a ModelSpec passed its family parser's checks (heads divide, dims positive and even).
#pragma once
#include <cstdint>

#include "core/activation.h"

namespace mt {

// Softmax attention with RoPE (or ALiBi, or neither), GQA, an optional sliding window and soft-cap.
struct AttentionSpec {
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  int64_t window = 0;          // query i sees keys i - window < j <= i; 0 = full causal attention
  int rope = 0;                // index into ModelSpec::rope_tables; -1 = no rotary embedding (NoPE)
  double scale = 0.0;          // logit scale (1/sqrt(head_dim) unless the family says otherwise)
  double softcap = 0.0;        // logits -> softcap·tanh(logits/softcap); 0 = none
  bool alibi = false;          // ALiBi biases (Baichuan 2 13B)
  bool qk_norm = false;        // per-head RMSNorm on q and k before RoPE
  // The q/k norm's span and place: over the whole projection (q_dim, kv_dim: OLMo 2/3) instead of per head, and
  // after RoPE (Hunyuan) instead of before it.
  bool qk_norm_whole = false, qk_norm_after_rope = false;
  // Cohere's use_qk_norm: per-head LayerNorm without bias on q and k before RoPE, a weight per head (q_norm
  // [num_heads, head_dim], k_norm [num_kv_heads, head_dim]).
  bool qk_layer_norm = false;
  // Llama 4: per-head weightless RMS norm of q and k (Llama4TextL2Norm, x·rsqrt(mean(x²) + eps)); transformers
  // applies it after RoPE, which is the same as before it: the rotation keeps every head vector's norm.
  bool qk_l2_norm = false;
  // Chunked attention (Llama 4's attention_chunk_size): query i sees only the keys of its own chunk of positions,
  // position(j) / chunk == position(i) / chunk, causal, within its packed example; 0 = none.
  int64_t chunk = 0;
  // Attention temperature tuning (Llama 4's NoPE layers): queries × (log1p(floor((p + 1) / floor_scale)) · attn_scale
  // + 1), p the token's index in its row (transformers' arange over the sequence, packed or not); floor_scale 0 = none.
  double temperature_floor_scale = 0.0, temperature_attn_scale = 0.0;
  bool qkv_bias = false;       // biases on the q, k and v projections
  bool o_bias = false;         // bias on the output projection
  // Sigmoid output gate (Qwen3.5, Qwen3-Next): q_proj emits per head [query, gate]; attn ← attn · σ(gate).
  bool output_gate = false;
  bool normed_qk() const { return qk_norm || qk_l2_norm || qk_layer_norm; }  // q and k pass a per-head norm
  int64_t q_norm_width() const { return qk_norm_whole ? q_dim() : head_dim; }   // the q norm's rows and weight
  int64_t k_norm_width() const { return qk_norm_whole ? kv_dim() : head_dim; }
  // Attention sinks (GPT-OSS): a learned logit per head that joins each query's softmax denominator, with no value.
  bool sinks = false;
  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
};

// down(act(gate(x)) · up(x)), or without the gate down(act(up(x))) (StarCoder2's c_fc → act → c_proj).
struct MlpSpec {
  int64_t intermediate_size = 0;
  Activation activation = Activation::silu;
  bool bias = false;
  bool gated = true;
};

// Gated DeltaNet linear attention (Qwen3.5, Qwen3-Next): in_proj → depthwise causal conv1d + SiLU over q|k|v,
// L2-normalised q and k, β = σ(b), g = −exp(A_log)·softplus(a + dt_bias), the gated delta rule (state zero at
// every sequence and packed example), RMSNorm gated by silu(z), out_proj. Each k head serves
// num_v_heads / num_k_heads consecutive v heads.
struct DeltaNetSpec {
  int64_t num_k_heads = 0, num_v_heads = 0, k_head_dim = 0, v_head_dim = 0;
  int64_t conv_kernel = 4;     // linear_conv_kernel_dim
  int64_t key_dim() const { return num_k_heads * k_head_dim; }
  int64_t value_dim() const { return num_v_heads * v_head_dim; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }  // q | k | v channels of the conv
};

// Lightning attention (MiniMax-Text-01's linear-attention layers): qkv_proj → SiLU → per head [q | k | v] of head_dim,
// the decayed linear attention o_t = Σ_{s≤t} exp(−λ_h·(t − s))·(q_t·k_s)·v_s (no softmax, no 1/sqrt(d); the state
// zero at every sequence and packed example), RMSNorm over the heads' whole width (eps 1e-6, transformers builds it
// with the default), × sigmoid(output_gate(x)), out_proj. λ_h = 2^(−8(h + 1)/num_heads) · decay_factor, the factor
// 1 − layer / (num_layers − 1 + 1e-5) + 1e-5 of the layer's index (MiniMaxLightningAttention.get_slope_rate).
struct LightningSpec {
  int64_t num_heads = 0, head_dim = 0;
  double decay_factor = 1.0;
  double norm_eps = 1e-6;
  int64_t width() const { return num_heads * head_dim; }
};

// Multi-head latent attention (DeepSeek-V2/V3, Kimi K2, GLM-4.7-Flash): the query from q_proj, or low-rank through
// q_a_proj → RMSNorm → q_b_proj (q_lora_rank > 0); kv_a_proj_with_mqa gives a latent of kv_lora_rank (RMSNorm'd,
// then kv_b_proj → per head a no-rope key of qk_nope_head_dim and a value of v_head_dim) and one rotary key of
// qk_rope_head_dim shared by every head. Each head's query and key are [nope | rope]; the rope parts rotate by the
// layer's table (AttentionSpec::rope, whose head_dim is qk_rope_head_dim). The attention call's geometry (heads,
// q/k head dim qk_head_dim(), scale) is the layer's AttentionSpec.
struct MlaSpec {
  int64_t num_heads = 0;
  int64_t q_lora_rank = 0;     // 0: q_proj
  int64_t kv_lora_rank = 0, qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  bool bias = false;           // attention_bias: q_a_proj, kv_a_proj_with_mqa and o_proj have biases
  double latent_norm_eps = 1e-6;  // q_a_layernorm and kv_a_layernorm (transformers builds them with the default eps)
  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  int64_t q_dim() const { return num_heads * qk_head_dim(); }
  int64_t v_dim() const { return num_heads * v_head_dim; }
};

// The layer's token mixer.
enum class MixerKind { attention, gated_deltanet, latent_attention, lightning_attention };

// How a mixture-of-experts layer picks its experts per token.
enum class RouterKind {
  softmax_topk,   // softmax over all experts, the top k (Mixtral, Qwen2-MoE, Qwen3-MoE); norm_topk renormalises;
                  // weights × routed_scaling; with groups > 1, only experts of the topk_groups groups whose largest
                  // probability is highest (DeepSeek-V2's greedy and group_limited_greedy)
  sigmoid_group,  // sigmoid scores; the top k of scores + e_score_correction_bias within the topk_groups best of
                  // groups expert groups (a group's score: its two best); weights the unbiased scores, renormalised
                  // with norm_topk, × routed_scaling (GLM-4.5, the DeepSeek-V3 router; with one group, no bias and
                  // no scaling, Llama 4's: sigmoid of the top k logits; logits whose sigmoids both round to 1 in fp32
                  // tie to the lower expert where torch.topk takes the larger logit)
  topk_softmax,   // the top k of the logits, weights the softmax over those k logits (GPT-OSS)
};

// A mixture-of-experts feed-forward: a router (linear, no bias) picks top_k of num_experts SwiGLU experts per
// token and mixes their outputs by the routing weights (or, with weight_scales_input, Llama 4, scales each expert's
// input by its weight and adds the outputs); an optional shared expert (an MLP of shared_intermediate_size every
// token passes through) is added, scaled by sigmoid(shared_gate(x)) where shared_gate (Qwen2-MoE).
// num_experts == 0: the layer's feed-forward is the dense MlpSpec.
struct MoeSpec {
  int64_t num_experts = 0, top_k = 0, intermediate_size = 0;
  RouterKind router = RouterKind::softmax_topk;
  bool norm_topk = false;              // routing weights of the top k divided by their sum
  int64_t shared_intermediate_size = 0;  // 0 = no shared expert
  bool shared_gate = false;            // the shared expert's output × sigmoid(x · w_gate) (Qwen2-MoE)
  double routed_scaling = 1.0;         // softmax_topk, sigmoid_group: weights × routed_scaling_factor
  int64_t groups = 1, topk_groups = 1; // softmax_topk, sigmoid_group: n_group, topk_group
  // Llama 4: the routing weight scales the expert's input (expert(w·x)) and the experts' outputs add unweighted.
  bool weight_scales_input = false;
  // GPT-OSS: biases on the router and on every expert's projections, and the clamped SwiGLU
  // (up + 1)·g·σ(alpha·g) with g = min(gate, limit), up clamped to [−limit, limit] (swiglu_limit > 0).
  bool router_bias = false, expert_bias = false;
  double swiglu_alpha = 0.0, swiglu_limit = 0.0;  // swiglu_limit 0 = the plain SwiGLU silu(gate)·up
  bool clamped_swiglu() const { return swiglu_limit > 0.0; }
  bool active() const { return num_experts > 0; }
};

struct LayerSpec {
  AttentionSpec attention;     // mixer == attention; latent_attention: its attention call (MlaSpec)
  MlpSpec mlp;
  // Sandwich norms (Gemma 2/3, GLM-4): a norm on the attention output and one on the MLP output, each before
  // its residual add, beside the pre-norms every layer has.
  bool post_norms = false;
  // The norms before the attention and the feed-forward block; false (with post_norms): only the norms after each
  // block, the blocks reading the residual stream itself (OLMo 2/3, EXAONE 4).
  bool pre_norms = true;
  // Each block's output (after its post-norm) × residual_multiplier before its residual add (Granite).
  double residual_multiplier = 1.0;
  bool scaled_residual() const { return residual_multiplier != 1.0; }
  // The factor a block's output projection applies in its own pass: the residual multiplier where the projection
  // feeds the residual add directly (forward: its GEMM's alpha with the residual as epilogue input; backward: the
  // scale of the gradient it is reached by), 1 under a post-norm, whose input is the projection unscaled.
  float projection_scale() const { return post_norms ? 1.0f : static_cast<float>(residual_multiplier); }
  // MiniMax's residuals: each block's residual is its pre-norm's output, both terms scaled (layernorm_*_alpha / beta):
  // h1 = mixer_residual.alpha·norm1(x) + mixer_residual.beta·mixer(norm1(x)), y = ffn_residual.alpha·norm2(h1) +
  // ffn_residual.beta·ffn(norm2(h1)). The blocks' projections run unscaled and without their residual epilogue.
  struct ScaledResidual {
    double alpha = 1.0, beta = 1.0;
  };
  bool normed_residual = false;
  ScaledResidual mixer_residual, ffn_residual;
  // Parallel residual (Cohere): one norm feeds the mixer and the feed-forward, y = x + attn(norm(x)) + mlp(norm(x));
  // the layer has no norm before its feed-forward.
  bool parallel_residual = false;
  MixerKind mixer = MixerKind::attention;
  DeltaNetSpec deltanet;       // mixer == gated_deltanet
  bool is_deltanet() const { return mixer == MixerKind::gated_deltanet; }
  MlaSpec mla;                 // mixer == latent_attention
  bool is_mla() const { return mixer == MixerKind::latent_attention; }
  LightningSpec lightning;     // mixer == lightning_attention
  bool is_lightning() const { return mixer == MixerKind::lightning_attention; }
  // A linear-attention mixer (no softmax attention, no rotary embedding, no attention call).
  bool linear_mixer() const { return is_deltanet() || is_lightning(); }
  MoeSpec moe;  // active(): the feed-forward is this mixture of experts instead of mlp
};

}  // namespace mt
