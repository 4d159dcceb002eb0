// Layer features of tiny_spec's model alone and combined as no family combines them yet (issue #42): the dense
// families' norm placements and residual multipliers (post-block norms only as OLMo 2, Granite's multiplier, with
// sandwich norms, q/k norm over the whole projection and after RoPE, on dense and mixture-of-experts layers), and the
// LayerNorm families' features (LayerNorm with and without bias, the non-gated MLP, the parallel residual, the
// per-head q/k LayerNorm with a weight per head, the parallel residual around experts).
// Invariant: every variant is a valid spec of two layers, the same in the fp32 and the fp64 build.
#pragma once
#include <vector>

#include "engine/tiny_spec.h"

namespace mt::testing {

struct NormPlacementVariant {
  const char* name;
  bool pre_norms, post_norms;
  double residual_multiplier;
  bool qk_whole, qk_after_rope, moe;
};

struct LayerNormVariant {
  const char* name;
  NormKind norm;
  bool gated, parallel, qk_layer_norm, moe;
};

// Four experts, two per token, their weights normalised.
inline void small_experts(LayerSpec& l) {
  l.moe.num_experts = 4;
  l.moe.top_k = 2;
  l.moe.intermediate_size = 20;
  l.moe.norm_topk = true;
}

inline ModelSpec variant_spec(const NormPlacementVariant& v) {
  ModelSpec spec = tiny_spec(2, false);
  for (LayerSpec& l : spec.layers) {
    l.pre_norms = v.pre_norms;
    l.post_norms = v.post_norms;
    l.residual_multiplier = v.residual_multiplier;
    l.attention.qk_norm_whole = v.qk_whole;
    l.attention.qk_norm_after_rope = v.qk_after_rope;
    if (v.moe) small_experts(l);
  }
  spec.names.attn_out_norm = "post_attention_norm";
  spec.names.mlp_out_norm = "post_feedforward_layernorm";
  return spec;
}

inline ModelSpec variant_spec(const LayerNormVariant& v) {
  ModelSpec spec = tiny_spec(2, false);
  spec.norm_kind = v.norm;
  for (LayerSpec& l : spec.layers) {
    l.mlp.gated = v.gated;
    l.mlp.bias = !v.gated;
    l.parallel_residual = v.parallel;
    l.attention.qk_norm = !v.qk_layer_norm;
    l.attention.qk_layer_norm = v.qk_layer_norm;
    if (v.moe) small_experts(l);
  }
  return spec;
}

inline std::vector<NormPlacementVariant> norm_placement_variants() {
  return {
      {"post-block norms only, q/k norm over the projection (OLMo 2)", false, true, 1.0, true, false, false},
      {"residual multiplier (Granite)", true, false, 0.5, false, false, false},
      {"residual multiplier with sandwich norms", true, true, 0.5, false, false, false},
      {"residual multiplier with post-block norms only, q/k norm after RoPE", false, true, 1.7, false, true, false},
      {"q/k norm over the projection after RoPE", true, false, 1.0, true, true, false},
      {"post-block norms only and a residual multiplier around experts", false, true, 0.5, false, false, true},
      {"residual multiplier around experts", true, false, 0.5, false, false, true},
  };
}

inline std::vector<LayerNormVariant> layernorm_variants() {
  return {
      {"LayerNorm with bias, non-gated MLP with biases (StarCoder2)", NormKind::layer_with_bias, false, false, false,
       false},
      {"LayerNorm, parallel residual, per-head q/k LayerNorm (Cohere)", NormKind::layer, true, true, true, false},
      {"RMSNorm, parallel residual, non-gated MLP", NormKind::rms, false, true, false, false},
      {"LayerNorm with bias, parallel residual around experts", NormKind::layer_with_bias, true, true, false, true},
  };
}

}  // namespace mt::testing
