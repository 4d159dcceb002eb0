// Gemma3ForConditionalGeneration and Llama4ForConditionalGeneration checkpoints: the text tower trains exactly as the
// same weights in a Gemma3ForCausalLM / Llama4ForCausalLM directory (the gemma3 and llama4 fixtures), under the
// checkpoints' names (Gemma 3: transformers 5's model.language_model.* and the older language_model.model.*; Llama 4:
// language_model.model.*), and export carries the vision tensors through byte for byte in their own dtype, under their
// own names.
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

// The multimodal checkpoint a text fixture becomes: its architecture, model_type, vision_config and vision tensors.
struct Multimodal {
  std::string fixture, architecture, model_type;
  nlohmann::json vision_config;
  std::vector<std::string> vision_tensors;  // names after the vision prefix, 1-D
};

std::string renamed(const std::string& name, const Naming& n) {
  if (name == "lm_head.weight") return n.lm_head;
  return n.text_prefix + name.substr(std::string("model.").size());
}

// The fixture's model as a multimodal checkpoint: text tensors renamed (fp32, one shard), vision tensors (bf16, a
// second shard), an index, and config.json with the text config nested.
fs::path multimodal_copy(const Multimodal& m, const Naming& n, std::map<std::string, std::vector<float>>& vision) {
  const fs::path dir = fresh_scratch_dir("mm-src-" + n.tag) / "model";
  fs::create_directories(dir);
  const fs::path fixture = fixture_dir(m.fixture) / "model";
  std::ifstream in(fixture / "config.json");
  nlohmann::json text = nlohmann::json::parse(in);
  text.erase("architectures");
  const nlohmann::json config = {{"architectures", {m.architecture}},
                                 {"model_type", m.model_type},
                                 {"tie_word_embeddings", text.at("tie_word_embeddings")},
                                 {"text_config", text},
                                 {"vision_config", m.vision_config}};
  std::ofstream(dir / "config.json") << config.dump(2);

  const auto tensors = read_tensors(fixture / "model.safetensors");
  const mt::SafetensorsFile shapes(fixture / "model.safetensors");
  std::vector<mt::StWriteTensor> text_out, vision_out;
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  for (const auto& [name, values] : tensors) {
    text_out.push_back({renamed(name, n), shapes.tensors().at(name).shape, values.data(), nullptr});
    index["weight_map"][renamed(name, n)] = "model-00001-of-00002.safetensors";
  }
  const std::vector<std::vector<float>> values = {{0.5f, -1.25f, 3.0f, 0.0078125f}, {1.0f, 2.0f, -0.5f}};
  for (size_t i = 0; i < m.vision_tensors.size(); ++i) vision[n.vision_prefix + m.vision_tensors[i]] = values[i % 2];
  for (const auto& [name, values] : vision) {
    vision_out.push_back({name, {static_cast<int64_t>(values.size())}, values.data(), nullptr});
    index["weight_map"][name] = "model-00002-of-00002.safetensors";
  }
  mt::write_safetensors(dir / "model-00001-of-00002.safetensors", text_out, mt::DType::f32);
  mt::write_safetensors(dir / "model-00002-of-00002.safetensors", vision_out, mt::DType::bf16);
  std::ofstream(dir / "model.safetensors.index.json") << index.dump(2);
  return dir;
}

// Trains the fixture as it is and as each multimodal naming: the same losses, gradient norms and text tensors, and
// the vision tensors exported unchanged.
void check_carry(const Multimodal& m, const std::vector<Naming>& namings) {
  const std::string plain_run = "mm-plain-" + m.fixture;
  run_fixture(m.fixture, plain_run);
  const auto plain = read_metrics(scratch_dir(plain_run));
  const auto plain_final = read_tensors(scratch_dir(plain_run) / "final" / "model.safetensors");
  for (const Naming& n : namings) {
    INFO("naming " << n.tag);
    std::map<std::string, std::vector<float>> vision;
    const fs::path model = multimodal_copy(m, n, vision);
    const std::string run = "mm-" + n.tag;
    run_fixture(m.fixture, run, {"model.name=" + model.string()});

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

}  // namespace

TEST_CASE("Gemma 3 multimodal checkpoints train their text tower as Gemma3ForCausalLM and carry the vision "
          "tower through export", "[parity][multimodal]") {
  const Multimodal gemma3{"gemma3", "Gemma3ForConditionalGeneration", "gemma3",
                          {{"model_type", "siglip_vision_model"}, {"hidden_size", 8}},
                          {"vision_tower.vision_model.embeddings.patch_embedding.weight",
                           "multi_modal_projector.mm_soft_emb_norm.weight"}};
  check_carry(gemma3, {Naming{"v5", "model.language_model.", "lm_head.weight", "model."},
                       Naming{"legacy", "language_model.model.", "language_model.lm_head.weight", ""}});
}

TEST_CASE("Llama 4 multimodal checkpoints train their text tower as Llama4ForCausalLM and carry the vision tower "
          "and the projector through export", "[parity][multimodal][llama4]") {
  const Multimodal llama4{"llama4", "Llama4ForConditionalGeneration", "llama4",
                          {{"model_type", "llama4_vision_model"}, {"hidden_size", 8}},
                          {"vision_model.patch_embedding.linear.weight", "multi_modal_projector.linear_1.weight"}};
  check_carry(llama4, {Naming{"llama4", "language_model.model.", "language_model.lm_head.weight", ""}});
}
