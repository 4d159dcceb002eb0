// The layer features of issue #42's dense families, alone and combined as no family combines them yet, against
// central finite differences: post-block norms only (OLMo 2), Granite's residual multiplier with and without them and
// with sandwich norms, q/k norm over the whole projection and after RoPE, on dense and mixture-of-experts layers.
#include "catch.h"
#include "engine/layer_harness.h"

using namespace mt;
using namespace mt::testing;

namespace {

struct Variant {
  const char* name;
  bool pre_norms, post_norms;
  double residual_multiplier;
  bool qk_whole, qk_after_rope, moe;
};

ModelSpec variant_spec(const Variant& v) {
  ModelSpec spec = tiny_spec(2, false);
  for (LayerSpec& l : spec.layers) {
    l.pre_norms = v.pre_norms;
    l.post_norms = v.post_norms;
    l.residual_multiplier = v.residual_multiplier;
    l.attention.qk_norm_whole = v.qk_whole;
    l.attention.qk_norm_after_rope = v.qk_after_rope;
    if (v.moe) {
      l.moe.num_experts = 4;
      l.moe.top_k = 2;
      l.moe.intermediate_size = 20;
      l.moe.norm_topk = true;
    }
  }
  spec.names.attn_out_norm = "post_attention_norm";
  spec.names.mlp_out_norm = "post_feedforward_layernorm";
  return spec;
}

}  // namespace

TEST_CASE("post-block norms, residual multipliers and q/k norm placements match finite differences",
          "[engine][gradcheck][dense-families]") {
  const Variant variants[] = {
      {"post-block norms only, q/k norm over the projection (OLMo 2)", false, true, 1.0, true, false, false},
      {"residual multiplier (Granite)", true, false, 0.5, false, false, false},
      {"residual multiplier with sandwich norms", true, true, 0.5, false, false, false},
      {"residual multiplier with post-block norms only, q/k norm after RoPE", false, true, 1.7, false, true, false},
      {"q/k norm over the projection after RoPE", true, false, 1.0, true, true, false},
      {"post-block norms only and a residual multiplier around experts", false, true, 0.5, false, false, true},
      {"residual multiplier around experts", true, false, 0.5, false, false, true},
  };
  for (const Variant& v : variants) {
    INFO(v.name);
    LayerHarness h(variant_spec(v));
    // Without pre-norms the blocks read the N(0, 1) input itself and the functional grows (|Σ r·y| ≈ 60): its fp32
    // rounding over the 2e-3 step would exceed the check's absolute floor on small gradients. Halving r halves it;
    // dense layers also take a 1e-2 step (experts keep the small one: a larger one changes a token's experts).
    for (float& r : h.r) r *= 0.5f;
    if (!v.moe) h.fd_step = 1e-2f;
    for (int64_t layer : {0, 1}) check_layer_backward(h, layer);
  }
}
