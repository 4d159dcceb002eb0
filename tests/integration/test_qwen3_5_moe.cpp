// Golden tests of the hybrid families' expert layers (tools/make_hybrid_fixtures.py wrote the references):
// Qwen3.5-MoE (every layer sparse, gated shared expert, router loss on) and Qwen3-Next (sparse and dense layers,
// norm_topk_prob false, router loss off) train as transformers trains them in fp32: per-step loss, router loss and
// gradient norm within 1e-4 relative and every final parameter within 1e-4. A published-style
// Qwen3_5MoeForConditionalGeneration directory (experts fused into gate_up_proj / down_proj, text under
// model.language_model., vision tower and MTP head) trains exactly as the per-expert fixture and exports fused.
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "catch.h"
#include "integration/fixture_run.h"
#include "io/safetensors.h"

using namespace mt::testing;
namespace fs = std::filesystem;

TEST_CASE("qwen3_5_moe fixture (every layer 4 experts + gated shared expert, router loss on) matches PyTorch",
          "[parity][hybrid][moe]") {
  check_against_reference("qwen3_5_moe", "parity-qwen3_5_moe");
}
TEST_CASE("qwen3_next_moe fixture (mlp_only_layers, norm_topk_prob false, router loss off) matches PyTorch",
          "[parity][hybrid][moe]") {
  check_against_reference("qwen3_next_moe", "parity-qwen3_next_moe");
}
TEST_CASE("hybrid MoE fixtures match PyTorch in micro-batches of one sequence and with saved internals",
          "[parity][hybrid][moe]") {
  // The router loss is over the whole pass's tokens, as the batch-4 reference computes it in one forward.
  check_against_reference("qwen3_5_moe", "parity-qwen3_5_moe-mb1", {"training.micro_batch_size=1"});
  check_against_reference("qwen3_next_moe", "parity-qwen3_next_moe-saved", {"training.recompute_layers=0"});
}

namespace {

struct Shape {
  int64_t layers = 0, experts = 0, width = 0, hidden = 0;
};

std::string text_name(const std::string& name) {
  if (name == "lm_head.weight") return name;
  return "model.language_model." + name.substr(std::string("model.").size());
}
std::string layer_experts(int64_t layer) {
  return "model.language_model.layers." + std::to_string(layer) + ".mlp.experts.";
}
std::string per_expert(int64_t layer, int64_t e, const char* part) {
  return "model.layers." + std::to_string(layer) + ".mlp.experts." + std::to_string(e) + "." + part + ".weight";
}

// Per layer gate_up_proj [E, 2I, H] (expert e: its gate rows, then its up rows) and down_proj [E, H, I] from the
// per-expert tensors of `tensors` (model.layers.* names).
std::map<std::string, std::vector<float>> fused_experts(const std::map<std::string, std::vector<float>>& tensors,
                                                        const Shape& s) {
  std::map<std::string, std::vector<float>> out;
  for (int64_t l = 0; l < s.layers; ++l) {
    std::vector<float>& gate_up = out[layer_experts(l) + "gate_up_proj"];
    std::vector<float>& down = out[layer_experts(l) + "down_proj"];
    for (int64_t e = 0; e < s.experts; ++e) {
      for (const char* part : {"gate_proj", "up_proj"}) {
        const auto& v = tensors.at(per_expert(l, e, part));
        gate_up.insert(gate_up.end(), v.begin(), v.end());
      }
      const auto& v = tensors.at(per_expert(l, e, "down_proj"));
      down.insert(down.end(), v.begin(), v.end());
    }
  }
  return out;
}

bool is_expert_tensor(const std::string& name) {
  return name.find(".mlp.experts.") != std::string::npos;
}

// The qwen3_5_moe fixture as a published checkpoint: config nested under text_config, text tensors under
// model.language_model. with fused experts (fp32), vision and MTP tensors (bf16, per-expert MTP experts as the
// published ones have them) in a second shard, an index.
fs::path conditional_generation_copy(std::map<std::string, std::vector<float>>& frozen, Shape& shape) {
  const fs::path dir = fresh_scratch_dir("qwen3_5_moe-cg-src") / "model";
  fs::create_directories(dir);
  const fs::path fixture = fixture_dir("qwen3_5_moe") / "model";
  std::ifstream in(fixture / "config.json");
  nlohmann::json text = nlohmann::json::parse(in);
  text.erase("architectures");
  shape = {text.at("num_hidden_layers").get<int64_t>(), text.at("num_experts").get<int64_t>(),
           text.at("moe_intermediate_size").get<int64_t>(), text.at("hidden_size").get<int64_t>()};
  const nlohmann::json config = {{"architectures", {"Qwen3_5MoeForConditionalGeneration"}},
                                 {"model_type", "qwen3_5_moe"},
                                 {"tie_word_embeddings", false},
                                 {"text_config", text},
                                 {"vision_config", {{"model_type", "qwen3_5_moe"}, {"hidden_size", 8}}}};
  std::ofstream(dir / "config.json") << config.dump(2);

  const auto tensors = read_tensors(fixture / "model.safetensors");
  const mt::SafetensorsFile shapes(fixture / "model.safetensors");
  const auto fused = fused_experts(tensors, shape);
  std::vector<ShardTensor> text_tensors;
  for (const auto& [name, values] : tensors)
    if (!is_expert_tensor(name)) text_tensors.push_back({text_name(name), shapes.tensors().at(name).shape, &values});
  for (const auto& [name, values] : fused)
    text_tensors.push_back({name,
                            name.ends_with("gate_up_proj")
                                ? std::vector<int64_t>{shape.experts, 2 * shape.width, shape.hidden}
                                : std::vector<int64_t>{shape.experts, shape.hidden, shape.width},
                            &values});
  frozen["model.visual.blocks.0.attn.qkv.weight"] = {0.5f, -1.25f, 3.0f, 0.0078125f};
  frozen["mtp.layers.0.mlp.experts.0.gate_proj.weight"] = {1.0f, 2.0f, -0.5f};
  frozen["mtp.layers.0.mlp.shared_expert_gate.weight"] = {0.25f, -4.0f};
  write_two_shard_checkpoint(dir, text_tensors, frozen);
  return dir;
}

}  // namespace

TEST_CASE("a published-style Qwen3.5-MoE directory (fused experts, model.language_model., vision tower, MTP head) "
          "trains as the per-expert fixture and exports its experts fused", "[parity][multimodal][hybrid][moe]") {
  run_fixture("qwen3_5_moe", "qwen3_5_moe-cg-plain");
  const auto plain = read_metrics(scratch_dir("qwen3_5_moe-cg-plain"));
  const auto plain_final = read_tensors(scratch_dir("qwen3_5_moe-cg-plain") / "final" / "model.safetensors");
  std::map<std::string, std::vector<float>> frozen;
  Shape shape;
  const fs::path model = conditional_generation_copy(frozen, shape);
  run_fixture("qwen3_5_moe", "qwen3_5_moe-cg", {"model.name=" + model.string()});

  const auto rows = read_metrics(scratch_dir("qwen3_5_moe-cg"));
  REQUIRE(rows.size() == plain.size());
  for (size_t k = 0; k < rows.size(); ++k) {
    INFO("step " << k + 1);
    CHECK(rows[k].loss == plain[k].loss);
    CHECK(rows[k].aux_loss == plain[k].aux_loss);
    // The gradients are the same bits (the losses after each update are), but the two layouts order a layer's
    // expert tensors differently in its region, and the norm's fp64 sum runs in region order.
    CHECK(rows[k].grad_norm == Approx(plain[k].grad_norm).epsilon(1e-12));
  }
  const fs::path final_file = scratch_dir("qwen3_5_moe-cg") / "final" / "model.safetensors";
  const auto final_tensors = read_tensors(final_file);
  const mt::SafetensorsFile exported(final_file);
  for (const auto& [name, values] : plain_final) {
    if (is_expert_tensor(name)) continue;
    INFO(name);
    REQUIRE(final_tensors.count(text_name(name)) == 1);
    CHECK(final_tensors.at(text_name(name)) == values);
  }
  for (const auto& [name, values] : fused_experts(plain_final, shape)) {
    INFO(name);
    REQUIRE(final_tensors.count(name) == 1);
    CHECK(final_tensors.at(name) == values);
  }
  CHECK(exported.tensors().at(layer_experts(0) + "gate_up_proj").shape ==
        std::vector<int64_t>{shape.experts, 2 * shape.width, shape.hidden});
  CHECK(exported.tensors().at(layer_experts(0) + "down_proj").shape ==
        std::vector<int64_t>{shape.experts, shape.hidden, shape.width});
  for (const auto& [name, values] : frozen) {
    INFO(name);
    REQUIRE(final_tensors.count(name) == 1);
    CHECK(final_tensors.at(name) == values);
    CHECK(exported.tensors().at(name).dtype == mt::StDType::BF16);
  }
  const size_t per_expert_tensors = static_cast<size_t>(shape.layers * shape.experts * 3);
  CHECK(final_tensors.size() == plain_final.size() - per_expert_tensors + 2 * shape.layers + frozen.size());
}

TEST_CASE("hybrid MoE fixtures in bfloat16 stay within 2e-2 of PyTorch's fp32 losses", "[parity][hybrid][moe][bf16]") {
  for (const std::string name : {"qwen3_5_moe", "qwen3_next_moe"}) check_bf16_losses(name);
}
