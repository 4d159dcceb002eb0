// The LayerNorm families' layer features (issue #42), alone and combined as no family combines them yet, against
// central finite differences: LayerNorm with and without bias, the non-gated MLP, the parallel residual (dx aliasing
// dy, as the engine calls it), the per-head q/k LayerNorm with a weight per head, and the parallel residual around
// experts.
#include "catch.h"
#include "engine/layer_harness.h"

using namespace mt;
using namespace mt::testing;

namespace {

struct Variant {
  const char* name;
  NormKind norm;
  bool gated, parallel, qk_layer_norm, moe;
};

ModelSpec variant_spec(const Variant& v) {
  ModelSpec spec = tiny_spec(2, false);
  spec.norm_kind = v.norm;
  for (LayerSpec& l : spec.layers) {
    l.mlp.gated = v.gated;
    l.mlp.bias = !v.gated;
    l.parallel_residual = v.parallel;
    l.attention.qk_norm = !v.qk_layer_norm;
    l.attention.qk_layer_norm = v.qk_layer_norm;
    if (v.moe) {
      l.moe.num_experts = 4;
      l.moe.top_k = 2;
      l.moe.intermediate_size = 20;
      l.moe.norm_topk = true;
    }
  }
  return spec;
}

}  // namespace

TEST_CASE("LayerNorm, the non-gated MLP, the parallel residual and per-head q/k LayerNorm match finite differences",
          "[engine][gradcheck][layernorm]") {
  const Variant variants[] = {
      {"LayerNorm with bias, non-gated MLP with biases (StarCoder2)", NormKind::layer_with_bias, false, false, false,
       false},
      {"LayerNorm, parallel residual, per-head q/k LayerNorm (Cohere)", NormKind::layer, true, true, true, false},
      {"RMSNorm, parallel residual, non-gated MLP", NormKind::rms, false, true, false, false},
      {"LayerNorm with bias, parallel residual around experts", NormKind::layer_with_bias, true, true, false, true},
  };
  for (const Variant& v : variants) {
    INFO(v.name);
    LayerHarness h(variant_spec(v));
    for (int64_t layer : {0, 1}) check_layer_backward(h, layer);
    // The engine passes the same buffer as dy and dx: the parallel residual's last norm reads dy as its residual.
    std::vector<float> dx(h.x.size()), in_place = h.r;
    std::vector<float> dw(static_cast<size_t>(h.layout.layer(0).numel), 0.0f), dw_in_place = dw;
    decoder_layer_backward(h.ctx, 0, h.weights(1), h.x.data(), h.r.data(), dx.data(), dw.data(), h.mb, h.ws);
    decoder_layer_backward(h.ctx, 0, h.weights(1), h.x.data(), in_place.data(), in_place.data(),
                           dw_in_place.data(), h.mb, h.ws);
    CHECK(in_place == dx);
    CHECK(dw_in_place == dw);
  }
}
