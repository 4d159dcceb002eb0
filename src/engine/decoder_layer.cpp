// Decoder layer: the composition of blocks (see decoder_layer.h; the mixer is attention, latent attention, Gated
// DeltaNet or lightning attention by the layer's spec), following transformers' decoder layers —
// LlamaDecoderLayer's pre-norm residuals, Gemma 2/3's and GLM-4's sandwich norms (post_norms), OLMo 2's norms after
// each block only (post_norms without pre_norms), Granite's residual_multiplier, Cohere's parallel residual (one
// norm feeding attention and the MLP, whose outputs both add to the layer input) and MiniMax's residuals from the
// norms' outputs, scaled (normed_residual: h1 = α·norm1(x) + β·mixer(norm1(x)), y = α'·norm2(h1) + β'·ffn(norm2(h1))).
#include "engine/decoder_layer.h"

#include <algorithm>

#include "engine/attention_block.h"
#include "engine/deltanet_block.h"
#include "engine/hidden_norm.h"
#include "engine/lightning_block.h"
#include "engine/mla_block.h"
#include "engine/mlp_block.h"

namespace mt {
namespace {

// Mixture-of-experts layers run their feed-forward block whole over the micro-batch (it computes everything in
// its output step and recomputes it in backward); dense layers run the gated MLP in token chunks.
bool is_moe(const LayerContext& ctx, int64_t layer) { return ctx.layer(layer).moe.active(); }

// `tokens` rows of `width` elements into a [tokens, width] buffer.
const void* rows(const LayerContext& ctx, const void* p, int64_t first, int64_t width) {
  return static_cast<const char*>(p) + first * width * static_cast<int64_t>(dtype_size(ctx.backend->dtype()));
}
void* rows(const LayerContext& ctx, void* p, int64_t first, int64_t width) {
  return const_cast<void*>(rows(ctx, static_cast<const void*>(p), first, width));
}

// The feed-forward buffers of the chunk starting at token t0: gate and up are the saved internals' rows where the
// layer saves them, the workspace's chunk buffers otherwise.
MlpChunk chunk_buffers(const LayerContext& ctx, int64_t layer, const DecoderWorkspace& ws, const LayerInternals* saved,
                       int64_t t0) {
  MlpChunk b = ws.mlp;
  if (saved) {
    const int64_t I = ctx.layer(layer).mlp.intermediate_size;
    b.gate = saved->gate ? rows(ctx, saved->gate, t0, I) : nullptr;  // none without a gate (MlpSpec::gated)
    b.up = rows(ctx, saved->up, t0, I);
  }
  return b;
}

// f(t0, T) for the feed-forward chunks of a micro-batch, in token order.
template <typename F>
void each_chunk(const MicroBatch& mb, const DecoderWorkspace& ws, F f) {
  for (int64_t t0 = 0; t0 < mb.tokens(); t0 += ws.chunk_tokens) f(t0, std::min(ws.chunk_tokens, mb.tokens() - t0));
}

// The blocks' inputs: the pre-norms' outputs (with a parallel residual norm1 for both), or (post-block norms only)
// the residual stream itself.
const void* mixer_input(const LayerContext& ctx, int64_t layer, const void* x, const LayerScratch& s) {
  return ctx.layer(layer).pre_norms ? s.norm1 : x;
}
const void* ffn_input(const LayerContext& ctx, int64_t layer, const LayerScratch& s, const LayerInternals& n) {
  const LayerSpec& l = ctx.layer(layer);
  if (!l.pre_norms) return n.h1;
  return l.parallel_residual ? s.norm1 : s.norm2;
}

// y = residual + multiplier · y in place (Granite's residual_multiplier; y holds the block's output).
void add_scaled_residual(const LayerContext& ctx, int64_t layer, void* y, const void* residual, int64_t T) {
  const LayerSpec& l = ctx.layer(layer);
  if (l.scaled_residual()) ctx.backend->scale(y, static_cast<float>(l.residual_multiplier), T * ctx.spec->hidden_size);
  ctx.backend->add(y, residual, T * ctx.spec->hidden_size);
}

// dst = factor · src (the gradient reaching a block whose output a factor scales), in dst's rows; src itself where
// the factor is 1.
const void* scaled_gradient(const LayerContext& ctx, void* dst, const void* src, int64_t T, double factor) {
  if (factor == 1.0) return src;
  const int64_t n = T * ctx.spec->hidden_size;
  ctx.backend->copy_bytes(dst, src, n * static_cast<int64_t>(dtype_size(ctx.backend->dtype())));
  ctx.backend->scale(dst, static_cast<float>(factor), n);
  return dst;
}
// The factor on the feed-forward's output: MiniMax's β of a normed residual, or the residual multiplier.
double ffn_output_factor(const LayerSpec& l) {
  return l.normed_residual ? l.ffn_residual.beta : l.residual_multiplier;
}

// y = β·y + α·normed (a normed residual: y holds the block's output, normed the norm's output that fed the block).
void add_normed_residual(const LayerContext& ctx, void* y, const void* normed, const LayerSpec::ScaledResidual& r,
                         int64_t T) {
  ctx.backend->add_scaled(y, normed, static_cast<float>(r.alpha), static_cast<float>(r.beta),
                          T * ctx.spec->hidden_size);
}

// dx = d_block + d_residual: a pre-norm's backward with the residual's gradient added, or without the norm the sum.
// d_residual may be dx itself where the layer has pre-norms (the norm's backward reads it in its pass).
void input_gradient(const LayerContext& ctx, int64_t layer, const HiddenNorm& norm, void* dx, real* dw,
                    const void* d_block, const void* x, const void* d_residual, int64_t offset) {
  if (ctx.layer(layer).pre_norms) {
    norm.backward(dx, dw, d_block, x, offset, d_residual);
    return;
  }
  const int64_t n = norm.T * ctx.spec->hidden_size;
  ctx.backend->copy_bytes(dx, d_block, n * static_cast<int64_t>(dtype_size(ctx.backend->dtype())));
  ctx.backend->add(dx, d_residual, n);
}

// Everything up to the feed-forward: norm1, the mixer block, h1, norm2 (none with a parallel residual). Without
// post-norms the residual x enters h1 in the block's output projection (with the residual multiplier as the
// projection's scale); with them it is added after the post-norm; a normed residual adds α·norm1 to β·block.
void layer_inputs(const LayerContext& ctx, int64_t layer, const void* w, const void* x, const MicroBatch& mb,
                  const LayerScratch& s, const LayerInternals& n) {
  const LayerSpec& l = ctx.layer(layer);
  const bool post = l.post_norms;
  const LayerOffsets& o = ctx.offsets(layer);
  const HiddenNorm norm{ctx, w, mb.tokens()};
  void* block_out = post ? n.attn_out : n.h1;
  const void* residual = post || l.normed_residual ? nullptr : x;
  if (l.pre_norms) norm.forward(s.norm1, x, o.input_norm);
  const void* in = mixer_input(ctx, layer, x, s);
  if (l.is_deltanet())
    deltanet_block_forward(ctx, layer, w, in, block_out, residual, mb, n);
  else if (l.is_lightning())
    lightning_block_forward(ctx, layer, w, in, block_out, residual, mb, n);
  else if (l.is_mla())
    mla_block_forward(ctx, layer, w, in, block_out, residual, mb, s, n);
  else
    attention_block_forward(ctx, layer, w, in, block_out, residual, mb, n);
  if (post) {
    norm.forward(n.h1, n.attn_out, o.attn_out_norm);
    add_scaled_residual(ctx, layer, n.h1, x, mb.tokens());
  }
  if (l.normed_residual) add_normed_residual(ctx, n.h1, s.norm1, l.mixer_residual, mb.tokens());
  if (l.pre_norms && !l.parallel_residual) norm.forward(s.norm2, n.h1, o.mlp_norm);
}

}  // namespace

DecoderWorkspace::DecoderWorkspace(Backend& be, const ModelSpec& spec, int64_t max_tokens, int64_t max_seqs,
                                   int64_t max_seq_len, int64_t token_chunk)
    : backend(be), chunk_tokens(token_chunk_for(max_tokens, token_chunk)) {
  internals = allocate_internals(backend, max_internals_widths(spec), max_seqs, max_seq_len, buffers_);
  scratch = allocate_scratch(backend, scratch_widths(spec), max_tokens, buffers_);
  moe = allocate_moe_scratch(backend, spec, max_tokens, buffers_);
  mlp = allocate_mlp_chunk(backend, mlp_chunk_width(spec), chunk_tokens, buffers_);
  if (spec.normalized_head) {
    const int64_t n = spec.vocab_size * spec.hidden_size;
    head_weight = backend.alloc(n);
    head_weight_grad = backend.alloc_reals(n);
    buffers_.push_back(head_weight);
    buffers_.push_back(head_weight_grad);
  }
}

DecoderWorkspace::~DecoderWorkspace() {
  for (void* p : buffers_) backend.free_bytes(p);
}

void decoder_layer_forward(const LayerContext& ctx, int64_t layer, const void* w, const void* x, void* y,
                           const MicroBatch& mb, DecoderWorkspace& ws, const LayerInternals* saved,
                           const MoeKept* moe_kept) {
  const LayerInternals& n = saved ? *saved : ws.internals;
  const LayerScratch& s = ws.scratch;
  const LayerSpec& l = ctx.layer(layer);
  const bool post = l.post_norms;
  const int64_t H = ctx.spec->hidden_size;
  layer_inputs(ctx, layer, w, x, mb, s, n);
  const void* ffn_in = ffn_input(ctx, layer, s, n);
  if (is_moe(ctx, layer)) {
    moe_block_forward(ctx, layer, w, ffn_in, post ? n.mlp_out : y, mb, ws.moe, moe_kept);
    if (post) HiddenNorm{ctx, w, mb.tokens()}.forward(y, n.mlp_out, ctx.offsets(layer).mlp_out_norm);
    if (l.normed_residual)
      add_normed_residual(ctx, y, ffn_in, l.ffn_residual, mb.tokens());
    else
      add_scaled_residual(ctx, layer, y, n.h1, mb.tokens());
  } else {  // y = h1 + multiplier · down(...): in the down projection's pass, or after the post-norm
    each_chunk(mb, ws, [&](int64_t t0, int64_t T) {
      const MlpChunk b = chunk_buffers(ctx, layer, ws, saved, t0);
      mlp_block_inputs(ctx, layer, w, rows(ctx, ffn_in, t0, H), T, b);
      if (post) {
        mlp_block_output(ctx, layer, w, rows(ctx, n.mlp_out, t0, H), nullptr, T, b);
        HiddenNorm{ctx, w, T}.forward(rows(ctx, y, t0, H), rows(ctx, n.mlp_out, t0, H),
                                      ctx.offsets(layer).mlp_out_norm);
        add_scaled_residual(ctx, layer, rows(ctx, y, t0, H), rows(ctx, n.h1, t0, H), T);
      } else if (l.normed_residual) {
        mlp_block_output(ctx, layer, w, rows(ctx, y, t0, H), nullptr, T, b);
        add_normed_residual(ctx, rows(ctx, y, t0, H), rows(ctx, ffn_in, t0, H), l.ffn_residual, T);
      } else {
        mlp_block_output(ctx, layer, w, rows(ctx, y, t0, H), rows(ctx, n.h1, t0, H), T, b);
      }
    });
  }
}

// Backward. A residual multiplier scales the gradient of a block's output projection in its GEMMs
// (LayerSpec::projection_scale); where a post-norm or the MoE combine sits between, the scaled gradient goes to a
// buffer free at that point: the feed-forward's to d_hidden (written only after it), the mixer's to d_norm (whose
// post-norm backward writes d_block). A normed residual's β scales the gradient reaching each block the same way
// (the mixer's in dx, which is written last and whose dy is read no more), and its α·gradient joins the norm's
// input gradient before the norm's backward, which then adds no residual.
void decoder_layer_backward(const LayerContext& ctx, int64_t layer, const void* w, const void* x, const void* dy,
                            void* dx, real* dw, const MicroBatch& mb, DecoderWorkspace& ws,
                            const LayerInternals* saved, const MoeKept* moe_kept) {
  const LayerInternals& n = saved ? *saved : ws.internals;
  const LayerScratch& s = ws.scratch;
  const LayerOffsets& o = ctx.offsets(layer);
  const LayerSpec& l = ctx.layer(layer);
  const bool post = l.post_norms, parallel = l.parallel_residual;
  const HiddenNorm norm{ctx, w, mb.tokens()};
  const int64_t H = ctx.spec->hidden_size;

  if (saved) {  // only the cheap internals; the same kernels on the same inputs give the same values
    if (l.pre_norms) {
      norm.forward(s.norm1, x, o.input_norm);
      if (!parallel) norm.forward(s.norm2, n.h1, o.mlp_norm);
    }
  } else {  // recompute the internals from the layer input
    layer_inputs(ctx, layer, w, x, mb, s, n);
  }
  const void* ffn_in = ffn_input(ctx, layer, s, n);

  if (is_moe(ctx, layer)) {  // MoE, whole: y = h1 + multiplier · [post-norm] moe(norm2)
    if (!saved && post) moe_block_forward(ctx, layer, w, ffn_in, n.mlp_out, mb, ws.moe, moe_kept);
    const void* d_mlp = scaled_gradient(ctx, s.d_hidden, dy, mb.tokens(), ffn_output_factor(l));
    if (post) {
      norm.backward(s.d_block, dw, d_mlp, n.mlp_out, o.mlp_out_norm);
      d_mlp = s.d_block;
    }
    moe_block_backward(ctx, layer, w, ffn_in, d_mlp, s.d_norm, dw, mb, ws.moe, moe_kept);
  } else {  // MLP, chunk by chunk: y = h1 + multiplier · [post-norm] down(act(gate)·up).
    each_chunk(mb, ws, [&](int64_t t0, int64_t T) {
      const MlpChunk b = chunk_buffers(ctx, layer, ws, saved, t0);
      if (!saved) {  // gate and up; the block's backward makes act itself
        mlp_block_projections(ctx, layer, w, rows(ctx, ffn_in, t0, H), T, b);
        if (post) {  // the post-norm's backward reads the block's output
          mlp_block_activation(ctx, layer, T, b);
          mlp_block_output(ctx, layer, w, rows(ctx, n.mlp_out, t0, H), nullptr, T, b);
        }
      }
      const void* d_mlp = rows(ctx, dy, t0, H);
      if (post) {
        HiddenNorm{ctx, w, T}.backward(rows(ctx, s.d_block, t0, H), dw,
                                       scaled_gradient(ctx, rows(ctx, s.d_hidden, t0, H), d_mlp, T,
                                                       l.residual_multiplier),
                                       rows(ctx, n.mlp_out, t0, H), o.mlp_out_norm);
        d_mlp = rows(ctx, s.d_block, t0, H);
      } else if (l.normed_residual) {
        d_mlp = scaled_gradient(ctx, rows(ctx, s.d_hidden, t0, H), d_mlp, T, l.ffn_residual.beta);
      }
      mlp_block_backward(ctx, layer, w, rows(ctx, ffn_in, t0, H), d_mlp, rows(ctx, s.d_norm, t0, H), dw, T, b);
    });
  }
  // ∂L/∂h1: through norm2 plus the residual, or with a parallel residual (y = h1 + mlp(norm1)) dy itself; a normed
  // residual's α·dy reaches norm2's output.
  const int64_t n_hidden = mb.tokens() * H;
  if (l.normed_residual) ctx.backend->add_scaled(s.d_norm, dy, static_cast<float>(l.ffn_residual.alpha), 1.f, n_hidden);
  const void* d_h1 = dy;
  if (!parallel) {
    input_gradient(ctx, layer, norm, s.d_hidden, dw, s.d_norm, n.h1, l.normed_residual ? nullptr : dy, o.mlp_norm);
    d_h1 = s.d_hidden;
  }

  // Attention: h1 = x + multiplier · [post-norm] o_proj(attn), or α·norm1 + β·mixer(norm1).
  const void* d_attn_out = d_h1;
  if (post) {
    norm.backward(s.d_block, dw, scaled_gradient(ctx, s.d_norm, d_h1, mb.tokens(), l.residual_multiplier),
                  n.attn_out, o.attn_out_norm);
    d_attn_out = s.d_block;
  } else if (l.normed_residual) {
    d_attn_out = scaled_gradient(ctx, dx, d_h1, mb.tokens(), l.mixer_residual.beta);
  }
  // With a parallel residual the feed-forward's gradient of norm1 waits in d_norm while the mixer's lands in d_hidden.
  void* d_mixer_in = parallel ? s.d_hidden : s.d_norm;
  const void* in = mixer_input(ctx, layer, x, s);
  if (l.is_deltanet())
    deltanet_block_backward(ctx, layer, w, in, d_attn_out, d_mixer_in, dw, mb, s, n);
  else if (l.is_lightning())
    lightning_block_backward(ctx, layer, w, in, d_attn_out, d_mixer_in, dw, mb, s, n);
  else if (l.is_mla())
    mla_block_backward(ctx, layer, w, in, d_attn_out, d_mixer_in, dw, mb, s, n);
  else
    attention_block_backward(ctx, layer, w, in, d_attn_out, d_mixer_in, dw, mb, s, n);
  if (parallel) ctx.backend->add(s.d_norm, s.d_hidden, n_hidden);
  if (l.normed_residual) {
    ctx.backend->add_scaled(s.d_norm, d_h1, static_cast<float>(l.mixer_residual.alpha), 1.f, n_hidden);
    d_h1 = nullptr;  // in d_norm
  }
  input_gradient(ctx, layer, norm, dx, dw, s.d_norm, x, d_h1, o.input_norm);  // d_h1 may be dy, which dx aliases
}

}  // namespace mt
