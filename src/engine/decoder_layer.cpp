// Dense decoder layer: forward and backward over one micro-batch, following transformers' LlamaDecoderLayer
// (Qwen2: q/k/v bias; Qwen3: per-head q/k RMSNorm before RoPE; Mistral: sliding window).
#include "engine/decoder_layer.h"

#include <cmath>

#include "core/error.h"

namespace mt {
namespace {

// Tensor `offset` elements into a region: weights in the backend's dtype, gradients in fp32; null if absent.
const void* at(const LayerContext& ctx, const void* base, int64_t offset) {
  if (offset < 0) return nullptr;
  return static_cast<const char*>(base) + offset * static_cast<int64_t>(dtype_size(ctx.backend->dtype()));
}
float* at(float* base, int64_t offset) { return offset < 0 ? nullptr : base + offset; }

struct Dims {
  int64_t T, H, I, nh, nkv, hd, q_dim, kv_dim;
};

Dims dims_of(const ModelSpec& s, const MicroBatch& mb) {
  return {mb.tokens(), s.hidden_size, s.intermediate_size, s.num_heads, s.num_kv_heads, s.head_dim,
          s.num_heads * s.head_dim, s.num_kv_heads * s.head_dim};
}

AttnShape attn_shape(const ModelSpec& s, int64_t layer, const MicroBatch& mb) {
  AttnShape a;
  a.batch = mb.seqs;
  a.seq = mb.seq_len;
  a.n_heads = s.num_heads;
  a.n_kv_heads = s.num_kv_heads;
  a.head_dim = s.head_dim;
  a.window = s.sliding_window.empty() ? 0 : s.sliding_window[static_cast<size_t>(layer)];
  a.seq_lens = mb.seq_lens;
  a.segments = mb.segments;
  return a;
}

// Everything up to the attention output: norm1, q/k/v (normed, rotated), attn, lse.
void attention_inputs_and_output(const LayerContext& ctx, int64_t layer, const void* w, const void* x,
                                 const MicroBatch& mb, DecoderWorkspace& ws, const LayerInternals& n) {
  Backend& be = *ctx.backend;
  const ModelSpec& s = *ctx.spec;
  const DecoderOffsets& o = ctx.layout->decoder;
  const Dims d = dims_of(s, mb);
  const auto eps = static_cast<float>(s.rms_norm_eps);

  be.rmsnorm_forward(ws.norm1, x, at(ctx, w, o.input_norm), d.T, d.H, eps);
  void* q_lin = s.qk_norm ? n.q_raw : n.q;
  void* k_lin = s.qk_norm ? n.k_raw : n.k;
  be.linear_forward(q_lin, ws.norm1, at(ctx, w, o.q), at(ctx, w, o.q_bias), d.T, d.H, d.q_dim);
  be.linear_forward(k_lin, ws.norm1, at(ctx, w, o.k), at(ctx, w, o.k_bias), d.T, d.H, d.kv_dim);
  be.linear_forward(n.v, ws.norm1, at(ctx, w, o.v), at(ctx, w, o.v_bias), d.T, d.H, d.kv_dim);
  if (s.qk_norm) {
    be.rmsnorm_forward(n.q, n.q_raw, at(ctx, w, o.q_norm), d.T * d.nh, d.hd, eps);
    be.rmsnorm_forward(n.k, n.k_raw, at(ctx, w, o.k_norm), d.T * d.nkv, d.hd, eps);
  }
  be.rope_forward(n.q, ctx.rope_cos, ctx.rope_sin, mb.positions, d.T, d.nh, d.hd, ctx.rope_rot_dim);
  be.rope_forward(n.k, ctx.rope_cos, ctx.rope_sin, mb.positions, d.T, d.nkv, d.hd, ctx.rope_rot_dim);
  be.attention_forward(n.attn, n.lse, n.q, n.k, n.v, attn_shape(s, layer, mb));
}

// h1 = x + o_proj(attn); norm2; gate, up, act = silu(gate)·up.
void mlp_inputs(const LayerContext& ctx, const void* w, const void* x, const MicroBatch& mb, DecoderWorkspace& ws,
                const LayerInternals& n) {
  Backend& be = *ctx.backend;
  const ModelSpec& s = *ctx.spec;
  const DecoderOffsets& o = ctx.layout->decoder;
  const Dims d = dims_of(s, mb);
  be.linear_forward(n.h1, n.attn, at(ctx, w, o.o), at(ctx, w, o.o_bias), d.T, d.q_dim, d.H);
  be.add(n.h1, x, d.T * d.H);
  be.rmsnorm_forward(ws.norm2, n.h1, at(ctx, w, o.post_norm), d.T, d.H, static_cast<float>(s.rms_norm_eps));
  be.linear_forward(n.gate, ws.norm2, at(ctx, w, o.gate), at(ctx, w, o.gate_bias), d.T, d.H, d.I);
  be.linear_forward(n.up, ws.norm2, at(ctx, w, o.up), at(ctx, w, o.up_bias), d.T, d.H, d.I);
  be.swiglu_forward(ws.act, n.gate, n.up, d.T * d.I);
}

}  // namespace

DecoderWorkspace::DecoderWorkspace(Backend& be, const ModelSpec& s, int64_t max_tokens, int64_t max_seqs,
                                   int64_t max_seq_len)
    : backend(be) {
  const int64_t T = max_tokens, H = s.hidden_size, I = s.intermediate_size;
  const int64_t qd = s.num_heads * s.head_dim, kvd = s.num_kv_heads * s.head_dim;
  internals = allocate_internals(backend, s, max_seqs, max_seq_len, true, buffers_);
  norm1 = take(T * H);
  norm2 = take(T * H);
  act = take(T * I);
  d_hidden = take(T * H);
  d_norm = take(T * H);
  d_attn = take(T * qd);
  dq = take(T * qd);
  dk = take(T * kvd);
  dv = take(T * kvd);
  d_gate = take(T * I);
  d_up = take(T * I);
  d_act = take(T * I);
}

DecoderWorkspace::~DecoderWorkspace() {
  for (void* p : buffers_) backend.free_bytes(p);
}

void* DecoderWorkspace::take(int64_t n) {
  buffers_.push_back(backend.alloc(n));
  return buffers_.back();
}

LayerInternals allocate_internals(Backend& be, const ModelSpec& s, int64_t seqs, int64_t seq_len, bool with_raw,
                                  std::vector<void*>& owned) {
  const int64_t T = seqs * seq_len, qd = s.num_heads * s.head_dim, kvd = s.num_kv_heads * s.head_dim;
  const int64_t H = s.hidden_size, I = s.intermediate_size;
  auto take = [&](int64_t n) {
    owned.push_back(be.alloc(n));
    return owned.back();
  };
  LayerInternals n;
  if (with_raw) {
    n.q_raw = take(T * qd);
    n.k_raw = take(T * kvd);
  }
  n.q = take(T * qd);
  n.k = take(T * kvd);
  n.v = take(T * kvd);
  n.attn = take(T * qd);
  n.h1 = take(T * H);
  n.gate = take(T * I);
  n.up = take(T * I);
  n.lse = be.alloc_floats(seqs * s.num_heads * seq_len);
  owned.push_back(n.lse);
  return n;
}

LayerInternals internals_rows(const LayerInternals& all, const ModelSpec& s, int64_t es, int64_t first_seq,
                              int64_t seq_len) {
  const int64_t t0 = first_seq * seq_len;
  auto rows = [&](void* p, int64_t width) -> void* {
    return p ? static_cast<char*>(p) + t0 * width * es : nullptr;
  };
  const int64_t qd = s.num_heads * s.head_dim, kvd = s.num_kv_heads * s.head_dim;
  LayerInternals r;
  r.q_raw = rows(all.q_raw, qd);
  r.k_raw = rows(all.k_raw, kvd);
  r.q = rows(all.q, qd);
  r.k = rows(all.k, kvd);
  r.v = rows(all.v, kvd);
  r.attn = rows(all.attn, qd);
  r.h1 = rows(all.h1, s.hidden_size);
  r.gate = rows(all.gate, s.intermediate_size);
  r.up = rows(all.up, s.intermediate_size);
  r.lse = all.lse + first_seq * s.num_heads * seq_len;
  return r;
}

void decoder_layer_forward(const LayerContext& ctx, int64_t layer, const void* w, const void* x, void* y,
                           const MicroBatch& mb, DecoderWorkspace& ws, const LayerInternals* saved) {
  Backend& be = *ctx.backend;
  const Dims d = dims_of(*ctx.spec, mb);
  const DecoderOffsets& o = ctx.layout->decoder;
  const LayerInternals& n = saved ? *saved : ws.internals;
  attention_inputs_and_output(ctx, layer, w, x, mb, ws, n);
  mlp_inputs(ctx, w, x, mb, ws, n);
  be.linear_forward(y, ws.act, at(ctx, w, o.down), at(ctx, w, o.down_bias), d.T, d.I, d.H);
  be.add(y, n.h1, d.T * d.H);
}

void decoder_layer_backward(const LayerContext& ctx, int64_t layer, const void* w, const void* x, const void* dy,
                            void* dx, float* dw, const MicroBatch& mb, DecoderWorkspace& ws,
                            const LayerInternals* saved) {
  Backend& be = *ctx.backend;
  const ModelSpec& s = *ctx.spec;
  const DecoderOffsets& o = ctx.layout->decoder;
  const Dims d = dims_of(s, mb);
  const auto eps = static_cast<float>(s.rms_norm_eps);
  const LayerInternals& n = saved ? *saved : ws.internals;

  if (saved) {  // only the cheap internals; the same kernels on the same inputs give the same values
    be.rmsnorm_forward(ws.norm1, x, at(ctx, w, o.input_norm), d.T, d.H, eps);
    be.rmsnorm_forward(ws.norm2, n.h1, at(ctx, w, o.post_norm), d.T, d.H, eps);
    be.swiglu_forward(ws.act, n.gate, n.up, d.T * d.I);
  } else {  // recompute the internals from the layer input
    attention_inputs_and_output(ctx, layer, w, x, mb, ws, n);
    mlp_inputs(ctx, w, x, mb, ws, n);
  }

  // MLP: y = h1 + down(silu(gate)·up).
  be.linear_backward(ws.d_act, at(dw, o.down), at(dw, o.down_bias), dy, ws.act, at(ctx, w, o.down), d.T, d.I, d.H, false);
  be.swiglu_backward(ws.d_gate, ws.d_up, ws.d_act, n.gate, n.up, d.T * d.I);
  be.linear_backward(ws.d_norm, at(dw, o.gate), at(dw, o.gate_bias), ws.d_gate, ws.norm2, at(ctx, w, o.gate), d.T, d.H,
                     d.I, false);
  be.linear_backward(ws.d_norm, at(dw, o.up), at(dw, o.up_bias), ws.d_up, ws.norm2, at(ctx, w, o.up), d.T, d.H, d.I, true);
  be.rmsnorm_backward(ws.d_hidden, at(dw, o.post_norm), ws.d_norm, n.h1, at(ctx, w, o.post_norm), d.T, d.H, eps);
  be.add(ws.d_hidden, dy, d.T * d.H);  // d_hidden = ∂L/∂h1

  // Attention: h1 = x + o_proj(attn).
  be.linear_backward(ws.d_attn, at(dw, o.o), at(dw, o.o_bias), ws.d_hidden, n.attn, at(ctx, w, o.o), d.T, d.q_dim, d.H,
                     false);
  be.attention_backward(ws.dq, ws.dk, ws.dv, ws.d_attn, n.q, n.k, n.v, n.attn, n.lse, attn_shape(s, layer, mb));
  be.rope_backward(ws.dq, ctx.rope_cos, ctx.rope_sin, mb.positions, d.T, d.nh, d.hd, ctx.rope_rot_dim);
  be.rope_backward(ws.dk, ctx.rope_cos, ctx.rope_sin, mb.positions, d.T, d.nkv, d.hd, ctx.rope_rot_dim);
  void* dq_lin = ws.dq;
  void* dk_lin = ws.dk;
  if (s.qk_norm) {
    // The q/k projections' gradients land in q/k, which nothing reads after this (saved internals included).
    be.rmsnorm_backward(n.q, at(dw, o.q_norm), ws.dq, n.q_raw, at(ctx, w, o.q_norm), d.T * d.nh, d.hd, eps);
    be.rmsnorm_backward(n.k, at(dw, o.k_norm), ws.dk, n.k_raw, at(ctx, w, o.k_norm), d.T * d.nkv, d.hd, eps);
    dq_lin = n.q;
    dk_lin = n.k;
  }
  be.linear_backward(ws.d_norm, at(dw, o.q), at(dw, o.q_bias), dq_lin, ws.norm1, at(ctx, w, o.q), d.T, d.H, d.q_dim, false);
  be.linear_backward(ws.d_norm, at(dw, o.k), at(dw, o.k_bias), dk_lin, ws.norm1, at(ctx, w, o.k), d.T, d.H, d.kv_dim, true);
  be.linear_backward(ws.d_norm, at(dw, o.v), at(dw, o.v_bias), ws.dv, ws.norm1, at(ctx, w, o.v), d.T, d.H, d.kv_dim, true);
  be.rmsnorm_backward(dx, at(dw, o.input_norm), ws.d_norm, x, at(ctx, w, o.input_norm), d.T, d.H, eps);
  be.add(dx, ws.d_hidden, d.T * d.H);
}

}  // namespace mt
