// A DeepSeek-V3 checkpoint as the hub publishes it, in FP8 blocks (tools/make_fp8_fixture.py's deepseek_v3_fp8):
// `train` dequantises it on load and trains as PyTorch does from the dequantised weights (3 AdamW steps: loss, grad
// norm and learning rate per step), and the final export is unquantised: no quantization_config in config.json, no
// scale tensors, every tensor in the run's dtype, the carried MTP tensor dequantised bit for bit.
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "catch.h"
#include "integration/fixture_run.h"
#include "io/safetensors.h"

using namespace mt::testing;

TEST_CASE("deepseek_v3_fp8 trains from its FP8 blocks as PyTorch from the dequantised weights", "[fp8][parity]") {
  const mt::TrainSummary summary = run_fixture("deepseek_v3_fp8", "parity-deepseek_v3_fp8");
  check_metrics("deepseek_v3_fp8", "parity-deepseek_v3_fp8");

  std::ifstream in(summary.final_dir / "config.json");
  const nlohmann::json config = nlohmann::json::parse(in);
  CHECK(!config.contains("quantization_config"));
  CHECK(config.at("architectures") == nlohmann::json::array({"DeepseekV3ForCausalLM"}));

  const mt::SafetensorsFile exported(summary.final_dir / "model.safetensors");
  const mt::SafetensorsModel source(fixture_dir("deepseek_v3_fp8") / "model");
  size_t unquantised = 0;
  for (const std::string& name : source.names()) {
    if (name.ends_with("_scale_inv")) {
      CHECK(!exported.tensors().contains(name));
      continue;
    }
    INFO(name);
    REQUIRE(exported.tensors().contains(name));
    CHECK(exported.tensors().at(name).dtype == mt::StDType::F32);
    ++unquantised;
  }
  CHECK(exported.tensors().size() == unquantised);

  const std::string mtp = "model.layers.2.self_attn.kv_a_proj_with_mqa.weight";
  const auto reference = read_tensors(fixture_dir("deepseek_v3_fp8") / "reference" / "dequantised.safetensors");
  const auto ours = read_tensors(summary.final_dir / "model.safetensors");
  REQUIRE(ours.at(mtp).size() == reference.at(mtp).size());
  CHECK(std::memcmp(ours.at(mtp).data(), reference.at(mtp).data(), ours.at(mtp).size() * 4) == 0);
}

TEST_CASE("deepseek_v3_fp8 in bfloat16: every step's loss within 2e-2 of PyTorch's fp32", "[fp8][bf16]") {
  check_bf16_losses("deepseek_v3_fp8");
}
