// Embedding and head templates (see edge_layers.h).
#include "engine/edge_layers.h"

#include "core/error.h"
#include "engine/hidden_norm.h"

namespace mt {

namespace {

// The embedding multiplier in the compute dtype, as transformers' Gemma models hold it
// (torch.tensor(hidden_size ** 0.5, dtype=hidden_states.dtype)), or unrounded (Granite's Python float).
float embedding_multiplier(const LayerContext& ctx) {
  const auto scale = static_cast<float>(ctx.spec->embedding_scale);
  const bool rounded = ctx.spec->embedding_scale_in_compute_dtype && ctx.backend->dtype() == DType::bf16;
  return rounded ? round_to_bf16(scale) : scale;
}

// logits × logit_scale as (x·logit_scale)·wᵀ: the head's input scaled in place, and its gradient after the loss.
void scale_head_input(const LayerContext& ctx, void* x, int64_t T) {
  if (ctx.spec->logit_scale != 1.0)
    ctx.backend->scale(x, static_cast<float>(ctx.spec->logit_scale), T * ctx.spec->hidden_size);
}

}  // namespace

void embedding_forward(const LayerContext& ctx, const void* table, void* y, const MicroBatch& mb) {
  ctx.backend->embedding_forward(y, table, mb.input_ids, mb.tokens(), ctx.spec->hidden_size);
  if (ctx.spec->embedding_scale != 1.0)
    ctx.backend->scale(y, embedding_multiplier(ctx), mb.tokens() * ctx.spec->hidden_size);
}

void embedding_backward(const LayerContext& ctx, real* dtable, void* dy, const MicroBatch& mb,
                        const int32_t* host_ids) {
  const int64_t H = ctx.spec->hidden_size;
  const auto row_bytes = H * static_cast<int64_t>(dtype_size(ctx.backend->dtype()));
  if (ctx.spec->padding_idx >= 0)
    for (int64_t t = 0; t < mb.tokens(); ++t)
      if (host_ids[t] == ctx.spec->padding_idx) ctx.backend->zero_bytes(static_cast<char*>(dy) + t * row_bytes, row_bytes);
  if (ctx.spec->embedding_scale != 1.0)
    ctx.backend->scale(dy, embedding_multiplier(ctx), mb.tokens() * ctx.spec->hidden_size);
  ctx.backend->embedding_backward(dtable, dy, mb.input_ids, mb.tokens(), ctx.spec->hidden_size);
}

void head_prepare(const LayerContext& ctx, const void* head, DecoderWorkspace& ws) {
  if (!ctx.spec->normalized_head) return;
  const ModelSpec& s = *ctx.spec;
  ctx.backend->normalize_rows_forward(ws.head_weight, weight_at(ctx, head, ctx.layout->head.lm_head), s.vocab_size,
                                      s.hidden_size);
  ctx.backend->zero_bytes(ws.head_weight_grad, s.vocab_size * s.hidden_size * static_cast<int64_t>(sizeof(real)));
}

void head_finish(const LayerContext& ctx, const void* head, real* dhead, DecoderWorkspace& ws) {
  if (!ctx.spec->normalized_head) return;
  const ModelSpec& s = *ctx.spec;
  const int64_t lm_head = ctx.layout->head.lm_head;
  ctx.backend->normalize_rows_backward(dhead + lm_head, ws.head_weight_grad, weight_at(ctx, head, lm_head),
                                       s.vocab_size, s.hidden_size);
}

double head_forward_backward(const LayerContext& ctx, const void* head, const void* table, const void* x,
                             void* dx, real* dhead, real* dtable, const MicroBatch& mb, float grad_scale,
                             DecoderWorkspace& ws, const real* row_weight) {
  Backend& be = *ctx.backend;
  const ModelSpec& s = *ctx.spec;
  const HeadOffsets& o = ctx.layout->head;
  const int64_t T = mb.tokens(), H = s.hidden_size, V = s.vocab_size;
  const bool tied = o.lm_head < 0;
  MT_ASSERT(!(tied && s.normalized_head), "a normalised head is never tied");
  const void* w_out = s.normalized_head ? ws.head_weight : tied ? table : weight_at(ctx, head, o.lm_head);
  real* dw_out = s.normalized_head ? ws.head_weight_grad : tied ? dtable : dhead + o.lm_head;
  const LayerScratch& sc = ws.scratch;
  const HiddenNorm norm{ctx, head, T};

  norm.forward(sc.norm1, x, o.norm);
  scale_head_input(ctx, sc.norm1, T);
  const double loss_sum = be.head_loss_rows(sc.d_norm, dw_out, sc.norm1, w_out, mb.targets, row_weight, nullptr, T,
                                            H, V, grad_scale, static_cast<float>(s.final_logit_softcap));
  scale_head_input(ctx, sc.d_norm, T);
  norm.backward(dx, dhead, sc.d_norm, x, o.norm);
  return loss_sum;
}

double head_loss_only(const LayerContext& ctx, const void* head, const void* table, const void* x,
                      const MicroBatch& mb, DecoderWorkspace& ws, real* row_loss) {
  Backend& be = *ctx.backend;
  const ModelSpec& s = *ctx.spec;
  const HeadOffsets& o = ctx.layout->head;
  const int64_t T = mb.tokens(), H = s.hidden_size, V = s.vocab_size;
  const void* w_out = s.normalized_head ? ws.head_weight : o.lm_head < 0 ? table : weight_at(ctx, head, o.lm_head);
  const LayerScratch& sc = ws.scratch;
  HiddenNorm{ctx, head, T}.forward(sc.norm1, x, o.norm);
  scale_head_input(ctx, sc.norm1, T);
  return be.head_loss_rows(nullptr, nullptr, sc.norm1, w_out, mb.targets, nullptr, row_loss, T, H, V, 0.f,
                           static_cast<float>(s.final_logit_softcap));
}

}  // namespace mt
