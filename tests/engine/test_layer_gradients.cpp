// The decoder layer template's backward against central finite differences, for the input and for
// every weight tensor, on a layer with q/k norm, biases, GQA, a sliding window and yarn RoPE.
#include <cmath>

#include "catch.h"
#include "engine/layer_harness.h"

using namespace mt;
using namespace mt::testing;

TEST_CASE("decoder layer backward matches finite differences", "[engine][gradcheck]") {
  LayerHarness h;
  for (int64_t layer : {0, 1}) check_layer_backward(h, layer);  // layer 0 has full attention, layer 1 the window
}
