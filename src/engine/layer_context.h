// LayerContext: what every layer template needs besides weights and activations — the backend, the model's
// shape and layout, and the tables its layers read in backend memory (RoPE per table, ALiBi slopes per layer).
// Invariant: read-only during a pass; rope[t] is the table of ModelSpec::rope_tables[t] for the pass's batch.
#pragma once
#include <vector>

#include "backend/backend.h"
#include "engine/moe_aux.h"
#include "model/model_spec.h"
#include "model/param_layout.h"

namespace mt {

struct RopeTableView {
  const real* cos = nullptr;   // [max_positions, rot_dim/2], backend memory
  const real* sin = nullptr;
  int64_t rot_dim = 0;
  bool interleaved = false;
};

struct LayerContext {
  Backend* backend = nullptr;
  const ModelSpec* spec = nullptr;
  const ParamLayout* layout = nullptr;
  std::vector<RopeTableView> rope;            // one per ModelSpec::rope_tables entry
  std::vector<const real*> alibi_slopes;      // per layer: [num_heads] in backend memory, or null
  MoeAuxState* moe_aux = nullptr;             // the router loss's statistics (models with MoE layers), or null
  ExpertOccupancy* expert_occupancy = nullptr;  // host counters of the MoE forwards, or null

  const LayerSpec& layer(int64_t i) const { return spec->layers[static_cast<size_t>(i)]; }
  const LayerOffsets& offsets(int64_t i) const { return layout->layer(i).offsets; }
};

}  // namespace mt

namespace mt {

// Tensor `offset` elements into a region: weights in the backend's dtype, gradients in fp32; null if absent (-1).
inline const void* weight_at(const LayerContext& ctx, const void* base, int64_t offset) {
  if (offset < 0) return nullptr;
  return static_cast<const char*>(base) + offset * static_cast<int64_t>(dtype_size(ctx.backend->dtype()));
}
inline real* grad_at(real* base, int64_t offset) { return offset < 0 ? nullptr : base + offset; }

// The model's RMSNorm over N rows of D with weight w, in its norm style (ModelSpec::norm_style): the product rounded
// as the family's RMSNorm rounds it.
inline void rmsnorm_forward(const LayerContext& ctx, void* y, const void* x, const void* w, int64_t N, int64_t D) {
  const ModelSpec& s = *ctx.spec;
  const auto eps = static_cast<float>(s.rms_norm_eps);
  if (s.norm_style == NormStyle::weight_fp32_product)
    ctx.backend->rmsnorm_forward_fp32_product(y, x, w, N, D, eps);
  else
    ctx.backend->rmsnorm_forward(y, x, w, N, D, eps, s.norm_weight_offset());
}

// A block's output projection y[T,O] = x·wᵀ + b, with the layer's residual stream added in the same pass where
// `residual` is given: y = residual + projection_scale·(x·wᵀ + b) (null: the projection alone).
inline void output_projection(const LayerContext& ctx, int64_t layer, void* y, const void* x, const void* w,
                              const void* b, const void* residual, int64_t T, int64_t I, int64_t O) {
  if (residual) {
    ctx.backend->linear_forward_add(y, x, w, b, residual, T, I, O, ctx.layer(layer).projection_scale());
  } else {
    ctx.backend->linear_forward(y, x, w, b, T, I, O);
  }
}

}  // namespace mt
