// Embedding and head templates (see edge_layers.h).
#include "engine/edge_layers.h"

namespace mt {

namespace {

const void* element(const LayerContext& ctx, const void* base, int64_t offset) {
  return static_cast<const char*>(base) + offset * static_cast<int64_t>(dtype_size(ctx.backend->dtype()));
}

}  // namespace

void embedding_forward(const LayerContext& ctx, const void* table, void* y, const MicroBatch& mb) {
  ctx.backend->embedding_forward(y, table, mb.input_ids, mb.tokens(), ctx.spec->hidden_size);
}

void embedding_backward(const LayerContext& ctx, float* dtable, const void* dy, const MicroBatch& mb) {
  ctx.backend->embedding_backward(dtable, dy, mb.input_ids, mb.tokens(), ctx.spec->hidden_size);
}

double head_forward_backward(const LayerContext& ctx, const void* head, const void* table, const void* x,
                             void* dx, float* dhead, float* dtable, const MicroBatch& mb, float grad_scale,
                             DecoderWorkspace& ws) {
  Backend& be = *ctx.backend;
  const ModelSpec& s = *ctx.spec;
  const HeadOffsets& o = ctx.layout->head;
  const int64_t T = mb.tokens(), H = s.hidden_size, V = s.vocab_size;
  const auto eps = static_cast<float>(s.rms_norm_eps);
  const bool tied = o.lm_head < 0;
  const void* w_out = tied ? table : element(ctx, head, o.lm_head);
  const void* norm_w = element(ctx, head, o.norm);
  float* dw_out = tied ? dtable : dhead + o.lm_head;

  be.rmsnorm_forward(ws.norm1, x, norm_w, T, H, eps);
  const double loss_sum = be.head_loss(ws.d_norm, dw_out, ws.norm1, w_out, mb.targets, T, H, V, grad_scale);
  be.rmsnorm_backward(dx, dhead + o.norm, ws.d_norm, x, norm_w, T, H, eps);
  return loss_sum;
}

}  // namespace mt
