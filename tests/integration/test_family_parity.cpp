// Golden tests of the dense RMSNorm families of issue #42 (tools/make_dense_family_fixtures.py wrote the references):
// Seed-OSS, ERNIE 4.5, SmolLM3, Granite, Hunyuan dense, OLMo 2, OLMo 3 and EXAONE 4 train as transformers trains them
// over padded batches of sequences longer than their sliding windows, in fp32: per-step loss and gradient norm within
// 1e-4 relative and every final parameter judged against PyTorch's fp32 and fp64 runs (check_against_reference); in
// bfloat16 the losses within 2e-2; a bad multiplier refused before anything is written.
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "core/error.h"
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

TEST_CASE("dense family fixtures in bfloat16 stay within 2e-2 of PyTorch's fp32 losses", "[parity][dense-families][bf16]") {
  for (const std::string name :
       {"seed_oss", "ernie4_5", "smollm3", "granite", "hunyuan_dense", "olmo2", "olmo3", "exaone4"}) check_bf16_losses(name);
}

TEST_CASE("a Granite config with logits_scaling 0 is refused in one line naming the file, nothing written",
          "[dense-families][bad-input]") {
  const std::filesystem::path dir = fresh_scratch_dir("granite-bad-scaling") / "model";
  std::filesystem::create_directories(dir);
  std::filesystem::copy(fixture_dir("granite") / "model", dir);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(dir / "config.json"));
  config["logits_scaling"] = 0.0;
  std::ofstream(dir / "config.json") << config.dump(2);
  const std::filesystem::path out = scratch_dir("granite-bad-scaling") / "output";
  std::string message;
  try {
    run_fixture("granite", "granite-bad-scaling-run", {"model.name=" + dir.string(), "training.output_dir=" + out.string()});
  } catch (const mt::Error& e) {
    message = e.what();
  }
  CHECK(message == "model config " + (dir / "config.json").string() + ": key 'logits_scaling' must be positive, got 0");
  CHECK(!std::filesystem::exists(out));
}
