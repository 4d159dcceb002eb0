// Qwen3_5ForConditionalGeneration checkpoints (the published Qwen3.5 directories): the text tower under
// model.language_model.* with the config nested under text_config trains exactly as the same weights in a
// Qwen3_5ForCausalLM directory (the qwen3_5 fixture), and export carries the vision tower (model.visual.*) and the
// multi-token-prediction head (mtp.*) through byte for byte in their own dtype.
#include <fstream>
#include <nlohmann/json.hpp>

#include "catch.h"
#include "integration/fixture_run.h"
#include "io/safetensors.h"

using namespace mt::testing;
namespace fs = std::filesystem;

namespace {

std::string renamed(const std::string& name) {
  if (name == "lm_head.weight") return name;
  return "model.language_model." + name.substr(std::string("model.").size());
}

// The qwen3_5 fixture's model as a published-style checkpoint: text tensors renamed (fp32), vision and MTP tensors
// (bf16) in a second shard, an index, config.json with the text config nested.
fs::path conditional_generation_copy(std::map<std::string, std::vector<float>>& frozen) {
  const fs::path dir = fresh_scratch_dir("qwen3_5-cg-src") / "model";
  fs::create_directories(dir);
  const fs::path fixture = fixture_dir("qwen3_5") / "model";
  std::ifstream in(fixture / "config.json");
  nlohmann::json text = nlohmann::json::parse(in);
  text.erase("architectures");
  const nlohmann::json config = {{"architectures", {"Qwen3_5ForConditionalGeneration"}},
                                 {"model_type", "qwen3_5"},
                                 {"tie_word_embeddings", false},
                                 {"text_config", text},
                                 {"vision_config", {{"model_type", "qwen3_5"}, {"hidden_size", 8}}}};
  std::ofstream(dir / "config.json") << config.dump(2);

  const auto tensors = read_tensors(fixture / "model.safetensors");
  const mt::SafetensorsFile shapes(fixture / "model.safetensors");
  std::vector<ShardTensor> text_tensors;
  for (const auto& [name, values] : tensors) text_tensors.push_back({renamed(name), shapes.tensors().at(name).shape, &values});
  frozen["model.visual.blocks.0.attn.qkv.weight"] = {0.5f, -1.25f, 3.0f, 0.0078125f};
  frozen["mtp.fc.weight"] = {1.0f, 2.0f, -0.5f};
  frozen["mtp.layers.0.linear_attn.A_log"] = {0.25f, -4.0f};
  write_two_shard_checkpoint(dir, text_tensors, frozen);
  return dir;
}

}  // namespace

TEST_CASE("Qwen3.5 conditional-generation checkpoints train their text tower as Qwen3_5ForCausalLM and carry the "
          "vision tower and MTP head through export", "[parity][multimodal][hybrid]") {
  run_fixture("qwen3_5", "qwen3_5-cg-plain");
  const auto plain = read_metrics(scratch_dir("qwen3_5-cg-plain"));
  const auto plain_final = read_tensors(scratch_dir("qwen3_5-cg-plain") / "final" / "model.safetensors");
  std::map<std::string, std::vector<float>> frozen;
  const fs::path model = conditional_generation_copy(frozen);
  run_fixture("qwen3_5", "qwen3_5-cg", {"model.name=" + model.string()});

  const auto rows = read_metrics(scratch_dir("qwen3_5-cg"));
  REQUIRE(rows.size() == plain.size());
  for (size_t k = 0; k < rows.size(); ++k) {
    CHECK(rows[k].loss == plain[k].loss);
    CHECK(rows[k].grad_norm == plain[k].grad_norm);
  }
  const fs::path final_file = scratch_dir("qwen3_5-cg") / "final" / "model.safetensors";
  const auto final_tensors = read_tensors(final_file);
  CHECK(final_tensors.size() == plain_final.size() + frozen.size());
  for (const auto& [name, values] : plain_final) {
    INFO(name);
    REQUIRE(final_tensors.count(renamed(name)) == 1);
    CHECK(final_tensors.at(renamed(name)) == values);
  }
  const mt::SafetensorsFile exported(final_file);
  for (const auto& [name, values] : frozen) {
    INFO(name);
    REQUIRE(final_tensors.count(name) == 1);
    CHECK(final_tensors.at(name) == values);  // every value is exact in bf16
    CHECK(exported.tensors().at(name).dtype == mt::StDType::BF16);
  }
}
