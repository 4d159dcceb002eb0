// Golden tests of the LayerNorm families (tools/make_layernorm_fixtures.py wrote the references), over right-padded
// sequences longer than the sliding windows, in fp32: per-step loss and gradient norm within 1e-4 relative and every
// final parameter as check_against_reference judges it. StarCoder2: LayerNorm with bias, biases everywhere, the
// non-gated GELU MLP, a sliding window. Cohere: the parallel residual from one LayerNorm without bias, per-head q/k
// LayerNorm with a weight per head, interleaved RoPE, the logit scale. Cohere2: sliding layers with RoPE and a global
// layer without.
#include "catch.h"
#include "integration/fixture_run.h"

using namespace mt::testing;

TEST_CASE("starcoder2 fixture (LayerNorm with bias, non-gated GELU MLP, biases, sliding window) matches PyTorch",
          "[parity][layernorm]") {
  check_against_reference("starcoder2", "parity-starcoder2");
}

TEST_CASE("cohere fixture (parallel residual, per-head q/k LayerNorm, interleaved RoPE, logit scale) matches PyTorch",
          "[parity][layernorm]") {
  check_against_reference("cohere", "parity-cohere");
}

TEST_CASE("cohere2 fixture (sliding layers with RoPE, a global layer without) matches PyTorch", "[parity][layernorm]") {
  check_against_reference("cohere2", "parity-cohere2");
}

TEST_CASE("layernorm fixtures match PyTorch with saved internals and in micro-batches of one sequence",
          "[parity][layernorm]") {
  check_against_reference("starcoder2", "parity-starcoder2-saved", {"training.recompute_layers=0"});
  check_against_reference("cohere", "parity-cohere-saved", {"training.recompute_layers=0"});
  check_against_reference("cohere2", "parity-cohere2-mb1", {"training.micro_batch_size=1"});
}
