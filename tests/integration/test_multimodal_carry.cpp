// Gemma3ForConditionalGeneration checkpoints: the text tower trains exactly as the same weights in a
// Gemma3ForCausalLM directory (the gemma3 fixture), under transformers 5's names (model.language_model.*) and the
// older ones (language_model.model.*), and export carries the vision tensors through byte for byte in their own
// dtype, under their own names.
#include <fstream>
#include <nlohmann/json.hpp>

#include "catch.h"
#include "config/config.h"
#include "integration/fixture_run.h"
#include "io/safetensors.h"

using namespace mt::testing;
namespace fs = std::filesystem;

namespace {

struct Naming {
  std::string tag, text_prefix, lm_head, vision_prefix;
};

std::string renamed(const std::string& name, const Naming& n) {
  if (name == "lm_head.weight") return n.lm_head;
  return n.text_prefix + name.substr(std::string("model.").size());
}

// The gemma3 fixture's model as a multimodal checkpoint: text tensors renamed (fp32, one shard), vision tensors
// (bf16, a second shard), an index, and config.json with the text config nested.
fs::path multimodal_copy(const Naming& n, std::map<std::string, std::vector<float>>& vision) {
  const fs::path dir = fresh_scratch_dir("mm-src-" + n.tag) / "model";
  fs::create_directories(dir);
  const fs::path fixture = fixture_dir("gemma3") / "model";
  std::ifstream in(fixture / "config.json");
  nlohmann::json text = nlohmann::json::parse(in);
  text.erase("architectures");
  const nlohmann::json config = {{"architectures", {"Gemma3ForConditionalGeneration"}},
                                 {"model_type", "gemma3"},
                                 {"tie_word_embeddings", text.at("tie_word_embeddings")},
                                 {"text_config", text},
                                 {"vision_config", {{"model_type", "siglip_vision_model"}, {"hidden_size", 8}}}};
  std::ofstream(dir / "config.json") << config.dump(2);

  const auto tensors = read_tensors(fixture / "model.safetensors");
  const mt::SafetensorsFile shapes(fixture / "model.safetensors");
  std::vector<mt::StWriteTensor> text_out, vision_out;
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  for (const auto& [name, values] : tensors) {
    text_out.push_back({renamed(name, n), shapes.tensors().at(name).shape, values.data(), nullptr});
    index["weight_map"][renamed(name, n)] = "model-00001-of-00002.safetensors";
  }
  vision[n.vision_prefix + "vision_tower.vision_model.embeddings.patch_embedding.weight"] = {0.5f, -1.25f, 3.0f, 0.0078125f};
  vision[n.vision_prefix + "multi_modal_projector.mm_soft_emb_norm.weight"] = {1.0f, 2.0f, -0.5f};
  for (const auto& [name, values] : vision) {
    vision_out.push_back({name, {static_cast<int64_t>(values.size())}, values.data(), nullptr});
    index["weight_map"][name] = "model-00002-of-00002.safetensors";
  }
  mt::write_safetensors(dir / "model-00001-of-00002.safetensors", text_out, mt::DType::f32);
  mt::write_safetensors(dir / "model-00002-of-00002.safetensors", vision_out, mt::DType::bf16);
  std::ofstream(dir / "model.safetensors.index.json") << index.dump(2);
  return dir;
}

}  // namespace

TEST_CASE("Gemma 3 multimodal checkpoints train their text tower as Gemma3ForCausalLM and carry the vision "
          "tower through export", "[parity][multimodal]") {
  run_fixture("gemma3", "mm-plain");
  const auto plain = read_metrics(scratch_dir("mm-plain"));
  const auto plain_final = read_tensors(scratch_dir("mm-plain") / "final" / "model.safetensors");
  for (const Naming& n : {Naming{"v5", "model.language_model.", "lm_head.weight", "model."},
                          Naming{"legacy", "language_model.model.", "language_model.lm_head.weight", ""}}) {
    INFO("naming " << n.tag);
    std::map<std::string, std::vector<float>> vision;
    const fs::path model = multimodal_copy(n, vision);
    const std::string run = "mm-" + n.tag;
    run_fixture("gemma3", run, {"model.name=" + model.string()});

    const auto rows = read_metrics(scratch_dir(run));
    REQUIRE(rows.size() == plain.size());
    for (size_t k = 0; k < rows.size(); ++k) {
      CHECK(rows[k].loss == plain[k].loss);
      CHECK(rows[k].grad_norm == plain[k].grad_norm);
    }
    const fs::path final_file = scratch_dir(run) / "final" / "model.safetensors";
    const auto final_tensors = read_tensors(final_file);
    CHECK(final_tensors.size() == plain_final.size() + vision.size());
    for (const auto& [name, values] : plain_final) {
      INFO(name);
      REQUIRE(final_tensors.count(renamed(name, n)) == 1);
      CHECK(final_tensors.at(renamed(name, n)) == values);
    }
    const mt::SafetensorsFile exported(final_file);
    for (const auto& [name, values] : vision) {
      INFO(name);
      REQUIRE(final_tensors.count(name) == 1);
      CHECK(final_tensors.at(name) == values);  // every value is exact in bf16
      CHECK(exported.tensors().at(name).dtype == mt::StDType::BF16);
    }
  }
}
