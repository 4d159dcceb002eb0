// training.moe_keep_layers on the MoE fixture families: MoE layers that keep their expert activations for backward
// (engine/moe_block.h MoeKept) train bitwise like MoE layers that recompute them. Every step's loss, router loss and
// gradient norm, and every final tensor, are the same bits with no MoE layer keeping (0), the last one keeping (1)
// and every one keeping; in micro-batches of one sequence (experts without rows) and beside saved internals too.
// The families: Qwen3-MoE (norm_topk), Mixtral (router loss), GPT-OSS (biased router and experts, clamped SwiGLU),
// DeepSeek-V3 (MLA + sigmoid noaux_tc router + shared expert), Llama 4 (the weights scale the expert input, shared
// expert), Qwen2-MoE (sigmoid-gated shared expert), GLM-4.5 (sigmoid group-limited router).
#include "catch.h"
#include "integration/fixture_run.h"

using namespace mt::testing;

namespace {

struct KeepRun {
  std::vector<MetricsRow> metrics;
  std::map<std::string, std::vector<float>> tensors;
};

KeepRun run_keeping(const std::string& name, const std::string& keep, std::vector<std::string> overrides) {
  std::string run = "moe-keep-" + name + "-" + keep;
  for (const std::string& o : overrides) run += "-" + o.substr(o.find('.') + 1);
  overrides.push_back("training.moe_keep_layers=" + keep);
  const mt::TrainSummary summary = run_fixture(name, run, overrides);
  return {read_metrics(scratch_dir(run)), read_tensors(summary.final_dir / "model.safetensors")};
}

void check_bitwise(const KeepRun& kept, const KeepRun& recomputed) {
  REQUIRE(kept.metrics.size() == recomputed.metrics.size());
  for (size_t s = 0; s < kept.metrics.size(); ++s) {
    INFO("step " << s + 1);
    CHECK(kept.metrics[s].loss == recomputed.metrics[s].loss);
    CHECK(kept.metrics[s].grad_norm == recomputed.metrics[s].grad_norm);
    CHECK(kept.metrics[s].aux_loss == recomputed.metrics[s].aux_loss);
  }
  REQUIRE(kept.tensors.size() == recomputed.tensors.size());
  for (const auto& [tensor, values] : recomputed.tensors) {
    INFO("tensor " << tensor);
    REQUIRE(kept.tensors.count(tensor) == 1);
    CHECK(kept.tensors.at(tensor) == values);
  }
}

void check_family(const std::string& name, const std::vector<std::string>& overrides = {}) {
  INFO("fixture " << name);
  const KeepRun recomputed = run_keeping(name, "0", overrides);
  for (const std::string keep : {"1", "99"}) {
    INFO("training.moe_keep_layers " << keep);
    check_bitwise(run_keeping(name, keep, overrides), recomputed);
  }
}

}  // namespace

TEST_CASE("MoE layers that keep their expert activations train bitwise like recomputing ones",
          "[parity][moe][moe-keep]") {
  for (const std::string name : {"qwen3_moe", "mixtral", "gpt_oss", "deepseek_v3", "llama4", "qwen2_moe", "glm4_moe"})
    check_family(name);
}

TEST_CASE("keeping MoE layers train bitwise like recomputing ones in micro-batches of one and beside saved internals",
          "[parity][moe][moe-keep]") {
  for (const std::string name : {"mixtral", "qwen2_moe", "llama4"}) check_family(name, {"training.micro_batch_size=1"});
  check_family("gpt_oss", {"training.recompute_layers=0"});
  check_family("deepseek_v3", {"training.micro_batch_size=1", "training.recompute_layers=1"});
}
