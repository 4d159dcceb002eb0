// Golden tests of the hybrid linear-attention families (tools/make_hybrid_fixtures.py wrote the references):
// Qwen3.5's Gated DeltaNet and gated-attention layers train as transformers trains them, over sequences shorter
// than, equal to and longer than its 64-token chunks, padded and packed, in fp32: per-step loss and gradient norm
// within 1e-4 relative and every parameter's update by the fp64 rule (update_rule.h); the rule rejects the gate
// tensors of a run whose gate gradient is 1 % off. MiniMax's lightning attention between softmax layers, with its
// residuals from the norms and its experts, trains as transformers trains it, padded and packed.
#include <cmath>

#include "catch.h"
#include "core/error.h"
#include "integration/fixture_run.h"
#include "integration/update_rule.h"
#include "io/safetensors.h"

using namespace mt::testing;

TEST_CASE("qwen3_5 fixture (Gated DeltaNet and gated attention, sequences past two chunks, padding) matches PyTorch",
          "[parity][hybrid]") {
  check_against_reference("qwen3_5", "parity-qwen3_5");
}
TEST_CASE("qwen3_5_packed fixture (several examples per packed sequence: the state restarts per example) matches "
          "PyTorch run on the examples unpacked", "[parity][hybrid]") {
  check_against_reference("qwen3_5_packed", "parity-qwen3_5_packed");
}
TEST_CASE("qwen3_next fixture (in_proj_qkvz / in_proj_ba grouped by k head, dense feed-forward) matches PyTorch",
          "[parity][hybrid]") {
  check_against_reference("qwen3_next", "parity-qwen3_next");
}
TEST_CASE("qwen3_5_chunk fixture (sequences shorter than, equal to and longer than one 64-token chunk) matches "
          "PyTorch", "[parity][hybrid]") {
  check_against_reference("qwen3_5_chunk", "parity-qwen3_5_chunk");
}
TEST_CASE("the update rule rejects Gated DeltaNet gate tensors trained with a gate gradient 1 % off",
          "[parity][hybrid]") {
  // final_gate_perturbed.safetensors: A_log, dt_bias and in_proj_a after PyTorch's fp32 run with the gradient of the
  // gate g perturbed by 1 % (relative L2) at every layer and step; ours passes the same rule (the test above).
  const std::filesystem::path dir = fixture_dir("qwen3_5_chunk");
  const auto perturbed = read_tensors_f64(dir / "reference" / "final_gate_perturbed.safetensors");
  const auto initial = read_tensors_f64(dir / "model" / "model.safetensors");
  const auto fp32 = read_tensors_f64(dir / "reference" / "final.safetensors");
  const auto fp64 = read_tensors_f64(dir / "reference" / "final_fp64.safetensors");
  REQUIRE(perturbed.size() == 3);  // the one DeltaNet layer's A_log, dt_bias, in_proj_a
  for (const auto& [tensor, values] : perturbed) {
    const UpdateDistances d = update_distances(initial.at(tensor), values, fp32.at(tensor), fp64.at(tensor));
    INFO(tensor << ": " << d.describe());
    CHECK_FALSE(d.passes());
  }
}
TEST_CASE("hybrid fixtures match PyTorch in micro-batches of one sequence and with saved internals",
          "[parity][hybrid]") {
  check_against_reference("qwen3_5", "parity-qwen3_5-mb1", {"training.micro_batch_size=1"});
  // No layer recomputes: backward reads the DeltaNet's and the gated attention's saved internals.
  check_against_reference("qwen3_5_packed", "parity-qwen3_5-saved", {"training.recompute_layers=0"});
}

TEST_CASE("minimax fixture (lightning attention between softmax layers, residuals from the norms with alpha/beta "
          "factors, experts with the router loss, sequences across many lightning blocks, padding) matches PyTorch",
          "[parity][hybrid]") {
  check_against_reference("minimax", "parity-minimax");
}
TEST_CASE("minimax_packed fixture (several examples per packed sequence: the lightning state restarts per example) "
          "matches PyTorch run on the examples unpacked", "[parity][hybrid]") {
  check_against_reference("minimax_packed", "parity-minimax_packed");
}
TEST_CASE("minimax fixture matches PyTorch in micro-batches of one sequence and with saved internals",
          "[parity][hybrid]") {
  check_against_reference("minimax", "parity-minimax-mb1", {"training.micro_batch_size=1"});
  check_against_reference("minimax_packed", "parity-minimax-saved", {"training.recompute_layers=0"});
}

TEST_CASE("a Qwen3.5 checkpoint missing A_log or dt_bias is refused in one line, nothing written", "[hybrid]") {
  for (const std::string missing : {"model.layers.1.linear_attn.A_log", "model.layers.3.linear_attn.dt_bias"}) {
    INFO(missing);
    const std::filesystem::path dir = fresh_scratch_dir("hybrid-missing") / "model";
    std::filesystem::create_directories(dir);
    const std::filesystem::path fixture = fixture_dir("qwen3_5") / "model";
    std::filesystem::copy_file(fixture / "config.json", dir / "config.json");
    const auto tensors = read_tensors(fixture / "model.safetensors");
    const mt::SafetensorsFile shapes(fixture / "model.safetensors");
    std::vector<mt::StWriteTensor> kept;
    for (const auto& [name, values] : tensors)
      if (name != missing) kept.push_back({name, shapes.tensors().at(name).shape, values.data(), nullptr});
    mt::write_safetensors(dir / "model.safetensors", kept, mt::DType::f32);
    const std::filesystem::path out = scratch_dir("hybrid-missing") / "output";
    std::string message;
    try {
      run_fixture("qwen3_5", "hybrid-missing-run", {"model.name=" + dir.string(), "training.output_dir=" + out.string()});
    } catch (const mt::Error& e) {
      message = e.what();
    }
    CHECK(message == "model dir " + dir.string() + ": tensor '" + missing + "' not found");
    CHECK(!std::filesystem::exists(out));
  }
}

TEST_CASE("hybrid fixtures in bfloat16 stay within 2e-2 of PyTorch's fp32 losses", "[parity][hybrid][bf16]") {
  for (const std::string name : {"qwen3_5", "qwen3_5_packed", "qwen3_next", "minimax", "minimax_packed"})
    check_bf16_losses(name);
}
