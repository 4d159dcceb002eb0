// The parallel residual's backward in place, as the engine calls it (dx aliasing dy: the layer's last norm reads dy
// as its residual), on the LayerNorm families' layer features (layer_variants.h): the same bits as with separate
// buffers. Their gradients are checked against finite differences in tests/grad64/test_layer_variants.cpp.
#include "catch.h"
#include "engine/layer_harness.h"
#include "engine/layer_variants.h"

using namespace mt;
using namespace mt::testing;

TEST_CASE("the parallel residual's backward gives the same bits with dx aliasing dy", "[engine][layernorm]") {
  for (const LayerNormVariant& v : layernorm_variants()) {
    INFO(v.name);
    LayerHarness h(variant_spec(v));
    std::vector<float> dx(h.x.size()), in_place = h.r;
    std::vector<float> dw(static_cast<size_t>(h.layout.layer(0).numel), 0.0f), dw_in_place = dw;
    decoder_layer_backward(h.ctx, 0, h.weights(1), h.x.data(), h.r.data(), dx.data(), dw.data(), h.mb, h.ws);
    decoder_layer_backward(h.ctx, 0, h.weights(1), h.x.data(), in_place.data(), in_place.data(),
                           dw_in_place.data(), h.mb, h.ws);
    CHECK(in_place == dx);
    CHECK(dw_in_place == dw);
  }
}
