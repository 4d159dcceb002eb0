// Golden tests: `train` on each tiny fixture in fp32 reproduces PyTorch's per-step losses, pre-clip
// gradient norms and learning rates, and every final parameter (tools/make_fixtures.py wrote the references).
#include <cmath>

#include "catch.h"
#include "integration/fixture_run.h"

using namespace mt::testing;

namespace {

constexpr double kLossTolerance = 1e-4;    // relative, per step
constexpr double kParamTolerance = 1e-4;   // ‖ours − ref‖ / ‖ref‖, per tensor

void check_against_reference(const std::string& name, const std::string& run,
                             const std::vector<std::string>& overrides = {}) {
  const auto summary = run_fixture(name, run, overrides);
  const Reference ref = read_reference(name);
  const auto rows = read_metrics(scratch_dir(run));
  REQUIRE(rows.size() == ref.losses.size());
  for (size_t k = 0; k < rows.size(); ++k) {
    INFO(name << " step " << k + 1);
    CHECK(std::abs(rows[k].loss - ref.losses[k]) <= kLossTolerance * ref.losses[k]);
    CHECK(std::abs(rows[k].grad_norm - ref.grad_norms[k]) <= kLossTolerance * ref.grad_norms[k]);
    CHECK(std::abs(rows[k].lr - ref.lrs[k]) <= 1e-12);
  }
  const auto ours = read_tensors(summary.final_dir / "model.safetensors");
  const auto theirs = read_tensors(fixture_dir(name) / "reference" / "final.safetensors");
  REQUIRE(ours.size() == theirs.size());
  for (const auto& [tensor, values] : theirs) {
    INFO(name << " tensor " << tensor);
    REQUIRE(ours.count(tensor) == 1);
    CHECK(relative_difference(ours.at(tensor), values) <= kParamTolerance);
  }
}

}  // namespace

TEST_CASE("llama fixture (GQA, llama3 rope, old config format) matches PyTorch", "[parity]") {
  check_against_reference("llama", "parity-llama");
}
TEST_CASE("qwen2 fixture (qkv bias, tied embeddings, MQA) matches PyTorch", "[parity]") {
  check_against_reference("qwen2", "parity-qwen2");
}
TEST_CASE("qwen3 fixture (q/k norm, explicit head_dim, linear rope, no clipping) matches PyTorch", "[parity]") {
  check_against_reference("qwen3", "parity-qwen3");
}
TEST_CASE("mistral fixture (sliding window, yarn rope) matches PyTorch", "[parity]") {
  check_against_reference("mistral", "parity-mistral");
}
TEST_CASE("micro-batches and accumulation passes still match PyTorch", "[parity]") {
  check_against_reference("llama", "parity-llama-mb1", {"training.micro_batch_size=1"});
  check_against_reference("qwen3", "parity-qwen3-passes", {"training.gradient_accumulation_steps=2",
                                                           "training.micro_batch_size=1"});
}

TEST_CASE("bfloat16 training stays within 2e-2 of PyTorch's fp32 losses", "[parity][bf16]") {
  for (const std::string name : {"llama", "qwen2", "qwen3", "mistral"}) {
    const std::string run = "parity-bf16-" + name;
    run_fixture(name, run, {"model.dtype=bfloat16"});
    const Reference ref = read_reference(name);
    const auto rows = read_metrics(scratch_dir(run));
    REQUIRE(rows.size() == ref.losses.size());
    for (size_t k = 0; k < rows.size(); ++k) {
      INFO(name << " step " << k + 1);
      CHECK(std::abs(rows[k].loss - ref.losses[k]) <= 2e-2 * ref.losses[k]);
    }
  }
}

TEST_CASE("bfloat16 weights streamed as fp32 master train bitwise like the bf16 copy", "[parity][bf16]") {
  // model.stream_dtype float32 keeps no bf16 copy (16 B/parameter): the weights are rounded where they are used
  // (the CUDA pipeline casts after the copy), to the same bf16 values.
  for (const std::string name : {"llama", "qwen2"}) {
    const auto copy = run_fixture(name, "stream-bf16-" + name, {"model.dtype=bfloat16"});
    const auto master = run_fixture(name, "stream-fp32-" + name, {"model.dtype=bfloat16", "model.stream_dtype=float32"});
    const auto a = read_metrics(scratch_dir("stream-bf16-" + name)), b = read_metrics(scratch_dir("stream-fp32-" + name));
    REQUIRE(a.size() == b.size());
    for (size_t k = 0; k < a.size(); ++k) {
      INFO(name << " step " << k + 1);
      CHECK(a[k].loss == b[k].loss);
      CHECK(a[k].grad_norm == b[k].grad_norm);
    }
    const auto ta = read_tensors(copy.final_dir / "model.safetensors");
    const auto tb = read_tensors(master.final_dir / "model.safetensors");
    for (const auto& [tensor, values] : ta) {
      INFO(name << " tensor " << tensor);
      CHECK(tb.at(tensor) == values);
    }
  }
}
