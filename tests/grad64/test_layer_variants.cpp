// The decoder layer's backward against fp64 finite differences (fd_check.h) on layer features alone and combined as
// no family combines them yet: tiny_spec's layer (q/k norm, q/k/v/o biases, GQA, a sliding window and yarn RoPE; its
// first layer has full attention, the second the window), and tests/engine/layer_variants.h's norm placements,
// residual multipliers, LayerNorms, non-gated MLPs, parallel residuals and per-head q/k LayerNorms, on dense and
// mixture-of-experts layers (two of four experts per token: the sampled steps change no token's experts).
#include "engine/layer_variants.h"
#include "grad64/fd_check.h"

using namespace mt;
using namespace mt::testing;
using namespace mt::testing::grad64;

namespace {

// Both layers of every variant's model.
template <typename Variant>
void check_variants(const std::vector<Variant>& variants) {
  const OneThread one;
  for (const Variant& v : variants) {
    LayerHarness h(variant_spec(v));
    check_layers(v.name, h);
  }
}

}  // namespace

TEST_CASE("the decoder layer's backward matches fp64 finite differences: tiny_spec's features",
          "[grad64][variants]") {
  const OneThread one;
  LayerHarness h;
  check_layers("tiny_spec", h);
}

TEST_CASE("the decoder layer's backward matches fp64 finite differences: norm placements and residual multipliers",
          "[grad64][variants]") {
  check_variants(norm_placement_variants());
}

TEST_CASE("the decoder layer's backward matches fp64 finite differences: LayerNorm, non-gated MLP, parallel residual",
          "[grad64][variants]") {
  check_variants(layernorm_variants());
}
