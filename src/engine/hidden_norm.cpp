// The hidden-size norm of every layer and of the head (see hidden_norm.h): RMSNorm or LayerNorm by the model's kind.
#include "engine/hidden_norm.h"

namespace mt {
namespace {

bool has_bias(const ModelSpec& s) { return s.norm_kind == NormKind::layer_with_bias; }

}  // namespace

void HiddenNorm::forward(void* y, const void* x, int64_t offset) const {
  const ModelSpec& s = *ctx.spec;
  const int64_t H = s.hidden_size;
  const auto eps = static_cast<float>(s.rms_norm_eps);
  if (s.norm_kind == NormKind::rms) {
    rmsnorm_forward(ctx, y, x, weight_at(ctx, w, offset), T, H);
    return;
  }
  ctx.backend->layernorm_forward(y, x, weight_at(ctx, w, offset), has_bias(s) ? weight_at(ctx, w, offset + H) : nullptr,
                                 T, H, 1, eps);
}

void HiddenNorm::backward(void* dx, real* dw, const void* dy, const void* x, int64_t offset,
                          const void* residual) const {
  const ModelSpec& s = *ctx.spec;
  const int64_t H = s.hidden_size;
  const auto eps = static_cast<float>(s.rms_norm_eps);
  const void* weight = weight_at(ctx, w, offset);
  if (s.norm_kind != NormKind::rms) {
    ctx.backend->layernorm_backward(dx, grad_at(dw, offset), has_bias(s) ? grad_at(dw, offset + H) : nullptr, dy, x,
                                    weight, residual, T, H, 1, eps);
  } else if (residual) {
    ctx.backend->rmsnorm_backward_add(dx, grad_at(dw, offset), dy, x, weight, residual, T, H, eps,
                                      s.norm_weight_offset());
  } else {
    ctx.backend->rmsnorm_backward(dx, grad_at(dw, offset), dy, x, weight, T, H, eps, s.norm_weight_offset());
  }
}

}  // namespace mt
