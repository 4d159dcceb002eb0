// Decoder layer: the composition of blocks (see decoder_layer.h; the mixer is attention or Gated DeltaNet by the
// layer's spec), following transformers' decoder layers —
// LlamaDecoderLayer's pre-norm residuals, and Gemma 2/3's and GLM-4's sandwich norms (post_norms).
#include "engine/decoder_layer.h"

#include "engine/attention_block.h"
#include "engine/deltanet_block.h"
#include "engine/mlp_block.h"

namespace mt {
namespace {

struct Norm {
  const LayerContext& ctx;
  const void* w;
  int64_t T;
  void forward(void* y, const void* x, int64_t offset) const {
    ctx.backend->rmsnorm_forward(y, x, weight_at(ctx, w, offset), T, ctx.spec->hidden_size,
                                 static_cast<float>(ctx.spec->rms_norm_eps), ctx.spec->norm_weight_offset());
  }
  void backward(void* dx, float* dw, const void* dy, const void* x, int64_t offset) const {
    ctx.backend->rmsnorm_backward(dx, grad_at(dw, offset), dy, x, weight_at(ctx, w, offset), T, ctx.spec->hidden_size,
                                  static_cast<float>(ctx.spec->rms_norm_eps), ctx.spec->norm_weight_offset());
  }
};

// The feed-forward block of the layer: the gated MLP in its three parts, or the mixture of experts (which
// computes everything in its output step and recomputes it in backward).
bool is_moe(const LayerContext& ctx, int64_t layer) { return ctx.layer(layer).moe.active(); }
void ffn_output(const LayerContext& ctx, int64_t layer, const void* w, void* out, const MicroBatch& mb,
                DecoderWorkspace& ws) {
  if (is_moe(ctx, layer))
    moe_block_forward(ctx, layer, w, ws.scratch.norm2, out, mb, ws.moe);
  else
    mlp_block_output(ctx, layer, w, out, mb, ws.scratch);
}

// Everything up to the MLP's activation: norm1, the attention block, h1, norm2, gate, up, act.
void layer_inputs(const LayerContext& ctx, int64_t layer, const void* w, const void* x, const MicroBatch& mb,
                  const LayerScratch& s, const LayerInternals& n) {
  const bool post = ctx.layer(layer).post_norms;
  const LayerOffsets& o = ctx.offsets(layer);
  const Norm norm{ctx, w, mb.tokens()};
  norm.forward(s.norm1, x, o.input_norm);
  if (ctx.layer(layer).is_deltanet())
    deltanet_block_forward(ctx, layer, w, s.norm1, post ? n.attn_out : n.h1, mb, n);
  else
    attention_block_forward(ctx, layer, w, s.norm1, post ? n.attn_out : n.h1, mb, n);
  if (post) norm.forward(n.h1, n.attn_out, o.attn_out_norm);
  ctx.backend->add(n.h1, x, mb.tokens() * ctx.spec->hidden_size);
  norm.forward(s.norm2, n.h1, o.mlp_norm);
  if (!is_moe(ctx, layer)) mlp_block_inputs(ctx, layer, w, s.norm2, mb, s, n);
}

}  // namespace

DecoderWorkspace::DecoderWorkspace(Backend& be, const ModelSpec& spec, int64_t max_tokens, int64_t max_seqs,
                                   int64_t max_seq_len)
    : backend(be) {
  internals = allocate_internals(backend, max_internals_widths(spec), max_seqs, max_seq_len, buffers_);
  scratch = allocate_scratch(backend, scratch_widths(spec), max_tokens, buffers_);
  moe = allocate_moe_scratch(backend, spec, max_tokens, buffers_);
  if (spec.normalized_head) {
    const int64_t n = spec.vocab_size * spec.hidden_size;
    head_weight = backend.alloc(n);
    head_weight_grad = backend.alloc_floats(n);
    buffers_.push_back(head_weight);
    buffers_.push_back(head_weight_grad);
  }
}

DecoderWorkspace::~DecoderWorkspace() {
  for (void* p : buffers_) backend.free_bytes(p);
}

void decoder_layer_forward(const LayerContext& ctx, int64_t layer, const void* w, const void* x, void* y,
                           const MicroBatch& mb, DecoderWorkspace& ws, const LayerInternals* saved) {
  const LayerInternals& n = saved ? *saved : ws.internals;
  const LayerScratch& s = ws.scratch;
  const bool post = ctx.layer(layer).post_norms;
  layer_inputs(ctx, layer, w, x, mb, s, n);
  ffn_output(ctx, layer, w, post ? n.mlp_out : y, mb, ws);
  if (post) Norm{ctx, w, mb.tokens()}.forward(y, n.mlp_out, ctx.offsets(layer).mlp_out_norm);
  ctx.backend->add(y, n.h1, mb.tokens() * ctx.spec->hidden_size);
}

void decoder_layer_backward(const LayerContext& ctx, int64_t layer, const void* w, const void* x, const void* dy,
                            void* dx, float* dw, const MicroBatch& mb, DecoderWorkspace& ws,
                            const LayerInternals* saved) {
  Backend& be = *ctx.backend;
  const LayerInternals& n = saved ? *saved : ws.internals;
  const LayerScratch& s = ws.scratch;
  const LayerOffsets& o = ctx.offsets(layer);
  const bool post = ctx.layer(layer).post_norms;
  const Norm norm{ctx, w, mb.tokens()};
  const int64_t TH = mb.tokens() * ctx.spec->hidden_size;

  if (saved) {  // only the cheap internals; the same kernels on the same inputs give the same values
    norm.forward(s.norm1, x, o.input_norm);
    norm.forward(s.norm2, n.h1, o.mlp_norm);
    if (!is_moe(ctx, layer)) mlp_block_activation(ctx, layer, mb, s, n);
  } else {  // recompute the internals from the layer input
    layer_inputs(ctx, layer, w, x, mb, s, n);
    if (post) ffn_output(ctx, layer, w, n.mlp_out, mb, ws);
  }

  // MLP: y = h1 + [post-norm] down(act(gate)·up).
  const void* d_mlp = dy;
  if (post) {
    norm.backward(s.d_block, dw, dy, n.mlp_out, o.mlp_out_norm);
    d_mlp = s.d_block;
  }
  if (is_moe(ctx, layer))
    moe_block_backward(ctx, layer, w, s.norm2, d_mlp, s.d_norm, dw, mb, ws.moe);
  else
    mlp_block_backward(ctx, layer, w, s.norm2, d_mlp, s.d_norm, dw, mb, s, n);
  norm.backward(s.d_hidden, dw, s.d_norm, n.h1, o.mlp_norm);
  be.add(s.d_hidden, dy, TH);  // d_hidden = ∂L/∂h1

  // Attention: h1 = x + [post-norm] o_proj(attn).
  const void* d_attn_out = s.d_hidden;
  if (post) {
    norm.backward(s.d_block, dw, s.d_hidden, n.attn_out, o.attn_out_norm);
    d_attn_out = s.d_block;
  }
  if (ctx.layer(layer).is_deltanet())
    deltanet_block_backward(ctx, layer, w, s.norm1, d_attn_out, s.d_norm, dw, mb, s, n);
  else
    attention_block_backward(ctx, layer, w, s.norm1, d_attn_out, s.d_norm, dw, mb, s, n);
  norm.backward(dx, dw, s.d_norm, x, o.input_norm);
  be.add(dx, s.d_hidden, TH);
}

}  // namespace mt
