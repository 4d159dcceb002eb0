// Golden tests of the mixture-of-experts families (tools/make_moe_fixtures.py wrote the references): `train` in
// fp32 reproduces PyTorch's per-step loss (LM + coef × router loss), router loss, gradient norm and learning rate,
// and every final parameter; with micro-batches of one sequence (experts that receive no row) as well.
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "integration/fixture_run.h"

using namespace mt::testing;

namespace {

constexpr double kTolerance = 1e-4;  // relative: per-step loss, aux loss

std::vector<nlohmann::json> metrics_lines(const std::string& run) {
  std::ifstream in(scratch_dir(run) / "metrics.jsonl");
  std::vector<nlohmann::json> rows;
  for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

}  // namespace

TEST_CASE("mixtral fixture (every layer sparse, router loss from config.json) matches PyTorch", "[parity][moe]") {
  check_against_reference("mixtral", "parity-mixtral");
}
TEST_CASE("qwen2_moe fixture (shared gated expert, dense and sparse layers, training.moe_aux_loss_coef) matches "
          "PyTorch", "[parity][moe]") {
  check_against_reference("qwen2_moe", "parity-qwen2_moe");
}
TEST_CASE("qwen3_moe fixture (mlp_only_layers, norm_topk_prob, q/k norm, router loss off) matches PyTorch",
          "[parity][moe]") {
  check_against_reference("qwen3_moe", "parity-qwen3_moe");
}
TEST_CASE("glm4_moe fixture (sigmoid router with e_score_correction_bias, group-limited top k, routed scaling, "
          "shared expert, first_k_dense_replace) matches PyTorch", "[parity][moe]") {
  // e_score_correction_bias is a buffer in transformers: its gradient is 0 and AdamW leaves it unchanged.
  check_against_reference("glm4_moe", "parity-glm4_moe");
}
TEST_CASE("llama4 fixture (chunked attention, NoPE layer with temperature tuning, q/k L2 norm, interleaved llama3 "
          "RoPE, sigmoid top-1 router scaling the expert input, shared expert, fused expert tensors, dense and MoE "
          "layers) matches PyTorch", "[parity][moe][llama4]") {
  check_against_reference("llama4", "parity-llama4");
}
TEST_CASE("llama4_packed fixture (top 2, packed examples: chunks from each example's positions, temperature from the "
          "row index) matches PyTorch", "[parity][moe][llama4]") {
  check_against_reference("llama4_packed", "parity-llama4_packed");
}
TEST_CASE("llama4 fixtures in micro-batches of one sequence and with saved internals still match PyTorch",
          "[parity][moe][llama4]") {
  check_against_reference("llama4", "parity-llama4-mb1", {"training.micro_batch_size=1"});
  check_against_reference("llama4_packed", "parity-llama4_packed-saved", {"training.recompute_layers=0"});
}
TEST_CASE("gpt_oss fixture (attention sinks, sliding and full layers, YaRN, biased router and experts, clamped "
          "SwiGLU, router loss on) matches PyTorch", "[parity][moe][gpt_oss]") {
  check_against_reference("gpt_oss", "parity-gpt_oss");
}
TEST_CASE("gpt_oss_mxfp4 fixture (experts loaded from MXFP4 blocks and scales, router loss off) matches PyTorch",
          "[parity][moe][gpt_oss]") {
  // The export holds the trained experts under their bf16 names (gate_up_proj, down_proj), as the reference does.
  check_against_reference("gpt_oss_mxfp4", "parity-gpt_oss_mxfp4");
}
TEST_CASE("MoE fixtures in micro-batches of one sequence (experts without rows) still match PyTorch",
          "[parity][moe]") {
  // The router loss is over the whole pass's tokens, as the batch-4 reference computes it in one forward.
  check_against_reference("mixtral", "parity-mixtral-mb1", {"training.micro_batch_size=1"});
  check_against_reference("qwen2_moe", "parity-qwen2_moe-mb1", {"training.micro_batch_size=1"});
  check_against_reference("qwen3_moe", "parity-qwen3_moe-saved", {"training.recompute_layers=0"});
  check_against_reference("glm4_moe", "parity-glm4_moe-mb1", {"training.micro_batch_size=1"});
  check_against_reference("gpt_oss", "parity-gpt_oss-mb1", {"training.micro_batch_size=1"});
  check_against_reference("gpt_oss_mxfp4", "parity-gpt_oss_mxfp4-saved", {"training.recompute_layers=0"});
}
TEST_CASE("training.moe_aux_loss_coef 0 logs the router loss and trains on the LM loss alone", "[parity][moe]") {
  run_fixture("mixtral", "moe-aux-zero", {"training.moe_aux_loss_coef=0.0"});
  std::ifstream in(fixture_dir("mixtral") / "reference.json");
  const nlohmann::json ref = nlohmann::json::parse(in);
  const auto rows = metrics_lines("moe-aux-zero");
  REQUIRE(rows.size() == 4);
  // Step 1 (same weights): the loss is the reference's minus coef × aux, and the aux loss is the reference's.
  const double aux = ref.at("aux_losses")[0].get<double>(), coef = ref.at("aux_coef").get<double>();
  CHECK(std::abs(rows[0].at("aux_loss").get<double>() - aux) <= kTolerance * aux);
  const double lm = ref.at("losses")[0].get<double>() - coef * aux;
  CHECK(std::abs(rows[0].at("loss").get<double>() - lm) <= kTolerance * lm);
}
TEST_CASE("a sigmoid-routed family refuses training.moe_aux_loss_coef", "[parity][moe]") {
  CHECK_THROWS_WITH(run_fixture("glm4_moe", "moe-glm-aux", {"training.moe_aux_loss_coef=0.01"}),
                    mt_test::contains("training.moe_aux_loss_coef: Glm4MoeForCausalLM routes by sigmoid scores"));
  CHECK_THROWS_WITH(run_fixture("llama4", "moe-llama4-aux", {"training.moe_aux_loss_coef=0.01"}),
                    mt_test::contains("training.moe_aux_loss_coef: Llama4ForCausalLM routes by sigmoid scores"));
}
TEST_CASE("bfloat16 MoE training stays within 2e-2 of PyTorch's fp32 losses", "[parity][bf16][moe]") {
  for (const std::string name : {"mixtral", "qwen2_moe", "qwen3_moe", "glm4_moe", "llama4", "gpt_oss"}) check_bf16_losses(name);
}
