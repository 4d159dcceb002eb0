// Golden tests of the dense RMSNorm families of issue #42 (tools/make_dense_family_fixtures.py wrote the references):
// Seed-OSS, ERNIE 4.5, SmolLM3, Granite, Hunyuan dense, OLMo 2, OLMo 3 and EXAONE 4 train as transformers trains them
// over padded batches of sequences longer than their sliding windows, in fp32: per-step loss and gradient norm within
// 1e-4 relative and every final parameter judged against PyTorch's fp32 and fp64 runs (check_against_reference).
#include "catch.h"
#include "integration/fixture_run.h"

using namespace mt::testing;

TEST_CASE("seed_oss fixture (biases on q, k, v and o) matches PyTorch", "[parity][dense-families]") {
  check_against_reference("seed_oss", "parity-seed_oss");
}

TEST_CASE("ernie4_5 fixture (interleaved RoPE, biases everywhere, tied embeddings) matches PyTorch",
          "[parity][dense-families]") {
  check_against_reference("ernie4_5", "parity-ernie4_5");
}

TEST_CASE("smollm3 fixture (a NoPE sliding layer among RoPE layers) matches PyTorch", "[parity][dense-families]") {
  check_against_reference("smollm3", "parity-smollm3");
}

TEST_CASE("granite fixture (embedding, attention, residual and logit multipliers) matches PyTorch",
          "[parity][dense-families]") {
  check_against_reference("granite", "parity-granite");
}

TEST_CASE("hunyuan_dense fixture (q/k norm after RoPE, NTK-alpha RoPE) matches PyTorch", "[parity][dense-families]") {
  check_against_reference("hunyuan_dense", "parity-hunyuan_dense");
}

TEST_CASE("olmo2 fixture (post-block norms only, q/k norm over the whole projection) matches PyTorch",
          "[parity][dense-families]") {
  check_against_reference("olmo2", "parity-olmo2");
}

TEST_CASE("olmo3 fixture (sliding layers, a RoPE table per layer type) matches PyTorch", "[parity][dense-families]") {
  check_against_reference("olmo3", "parity-olmo3");
}

TEST_CASE("exaone4 fixture (post-block norms, per-head q/k norm, global layer without RoPE) matches PyTorch",
          "[parity][dense-families]") {
  check_against_reference("exaone4", "parity-exaone4");
}

TEST_CASE("dense family fixtures match PyTorch with saved internals and in micro-batches of one sequence",
          "[parity][dense-families]") {
  // No layer recomputes: backward reads the saved internals (rotated q_raw / k_raw before Hunyuan's norm).
  check_against_reference("hunyuan_dense", "parity-hunyuan_dense-saved", {"training.recompute_layers=0"});
  check_against_reference("olmo2", "parity-olmo2-saved", {"training.recompute_layers=0"});
  check_against_reference("granite", "parity-granite-mb1", {"training.micro_batch_size=1"});
  check_against_reference("exaone4", "parity-exaone4-mb1", {"training.micro_batch_size=1"});
}
