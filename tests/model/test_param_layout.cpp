// ParamLayout: slot order, offsets and counts for tiny Qwen2 (q/k/v biases, tied), Qwen3 (qk norm) and Llama
// (every bias) models, and agreement with the tensors transformers saved for the golden fixtures.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "catch.h"
#include "io/safetensors.h"
#include "model/model_source.h"
#include "model/param_layout.h"

namespace fs = std::filesystem;

namespace {

mt::ModelSpec tiny(const char* architecture, nlohmann::json extra) {
  nlohmann::json j = {{"architectures", {architecture}}, {"vocab_size", 16},       {"hidden_size", 8},
                      {"intermediate_size", 12},         {"num_hidden_layers", 2}, {"num_attention_heads", 2},
                      {"num_key_value_heads", 1},        {"head_dim", 4},          {"max_position_embeddings", 32}};
  j.update(extra);
  return mt::parse_model_spec(j, "layout test");
}

struct Expected {
  const char* name;  // after "model.layers.<i>."
  std::vector<int64_t> shape;
  int64_t offset;
};

void check_layer(const mt::Region& r, int64_t layer, const std::vector<Expected>& expected) {
  CHECK(r.kind == mt::RegionKind::decoder_layer);
  CHECK(r.layer == layer);
  REQUIRE(r.params.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const mt::ParamSlot& p = r.params[i];
    INFO(p.hf_name);
    CHECK(p.hf_name == "model.layers." + std::to_string(layer) + "." + expected[i].name);
    CHECK(p.shape == expected[i].shape);
    CHECK(p.offset == expected[i].offset);
    CHECK(p.weight_decay == (p.shape.size() == 2));
    const bool norm = p.hf_name.find("norm") != std::string::npos, bias = p.hf_name.ends_with(".bias");
    CHECK(p.init == (norm ? mt::InitKind::ones : bias ? mt::InitKind::zeros : mt::InitKind::normal));
  }
}

}  // namespace

TEST_CASE("qwen2 layout: q/k/v biases, no o_proj bias, tied head", "[param_layout]") {
  const mt::ParamLayout l = mt::make_param_layout(tiny("Qwen2ForCausalLM", {{"tie_word_embeddings", true}}));
  REQUIRE(l.regions.size() == 4);
  CHECK(l.embedding().kind == mt::RegionKind::embedding);
  REQUIRE(l.embedding().params.size() == 1);
  CHECK(l.embedding().params[0].hf_name == "model.embed_tokens.weight");
  CHECK(l.embedding().params[0].shape == std::vector<int64_t>{16, 8});
  CHECK(l.embedding().numel == 128);

  const std::vector<Expected> layer = {
      {"input_layernorm.weight", {8}, 0},
      {"self_attn.q_proj.weight", {8, 8}, 8},
      {"self_attn.q_proj.bias", {8}, 72},
      {"self_attn.k_proj.weight", {4, 8}, 80},
      {"self_attn.k_proj.bias", {4}, 112},
      {"self_attn.v_proj.weight", {4, 8}, 116},
      {"self_attn.v_proj.bias", {4}, 148},
      {"self_attn.o_proj.weight", {8, 8}, 152},
      {"post_attention_layernorm.weight", {8}, 216},
      {"mlp.gate_proj.weight", {12, 8}, 224},
      {"mlp.up_proj.weight", {12, 8}, 320},
      {"mlp.down_proj.weight", {8, 12}, 416},
  };
  for (int64_t i = 0; i < 2; ++i) {
    check_layer(l.layer(i), i, layer);
    CHECK(l.layer(i).numel == 512);
  }
  const mt::DecoderOffsets& d = l.decoder;
  CHECK(d.input_norm == 0);
  CHECK(d.q == 8);
  CHECK(d.q_bias == 72);
  CHECK(d.k == 80);
  CHECK(d.k_bias == 112);
  CHECK(d.v == 116);
  CHECK(d.v_bias == 148);
  CHECK(d.o == 152);
  CHECK(d.o_bias == -1);
  CHECK(d.q_norm == -1);
  CHECK(d.k_norm == -1);
  CHECK(d.post_norm == 216);
  CHECK(d.gate == 224);
  CHECK(d.gate_bias == -1);
  CHECK(d.up == 320);
  CHECK(d.down == 416);
  CHECK(d.down_bias == -1);

  const mt::Region& head = l.head_region();
  CHECK(head.kind == mt::RegionKind::head);
  REQUIRE(head.params.size() == 1);
  CHECK(head.params[0].hf_name == "model.norm.weight");
  CHECK(l.head.norm == 0);
  CHECK(l.head.lm_head == -1);
  CHECK(l.total_numel == 128 + 2 * 512 + 8);
  CHECK(l.largest_region_numel == 512);
}

TEST_CASE("qwen3 layout: q_norm and k_norm after o_proj, untied head", "[param_layout]") {
  const mt::ParamLayout l = mt::make_param_layout(tiny("Qwen3ForCausalLM", nlohmann::json::object()));
  check_layer(l.layer(1), 1,
              {{"input_layernorm.weight", {8}, 0},
               {"self_attn.q_proj.weight", {8, 8}, 8},
               {"self_attn.k_proj.weight", {4, 8}, 72},
               {"self_attn.v_proj.weight", {4, 8}, 104},
               {"self_attn.o_proj.weight", {8, 8}, 136},
               {"self_attn.q_norm.weight", {4}, 200},
               {"self_attn.k_norm.weight", {4}, 204},
               {"post_attention_layernorm.weight", {8}, 208},
               {"mlp.gate_proj.weight", {12, 8}, 216},
               {"mlp.up_proj.weight", {12, 8}, 312},
               {"mlp.down_proj.weight", {8, 12}, 408}});
  CHECK(l.decoder.q_norm == 200);
  CHECK(l.decoder.k_norm == 204);
  CHECK(l.decoder.q_bias == -1);
  const mt::Region& head = l.head_region();
  REQUIRE(head.params.size() == 2);
  CHECK(head.params[1].hf_name == "lm_head.weight");
  CHECK(head.params[1].shape == std::vector<int64_t>{16, 8});
  CHECK(l.head.lm_head == 8);
  CHECK(head.numel == 136);
  CHECK(l.total_numel == 128 + 2 * 504 + 136);
}

TEST_CASE("llama layout with attention_bias and mlp_bias: every projection has a bias", "[param_layout]") {
  const mt::ParamLayout l =
      mt::make_param_layout(tiny("LlamaForCausalLM", {{"attention_bias", true}, {"mlp_bias", true}}));
  check_layer(l.layer(0), 0,
              {{"input_layernorm.weight", {8}, 0},
               {"self_attn.q_proj.weight", {8, 8}, 8},
               {"self_attn.q_proj.bias", {8}, 72},
               {"self_attn.k_proj.weight", {4, 8}, 80},
               {"self_attn.k_proj.bias", {4}, 112},
               {"self_attn.v_proj.weight", {4, 8}, 116},
               {"self_attn.v_proj.bias", {4}, 148},
               {"self_attn.o_proj.weight", {8, 8}, 152},
               {"self_attn.o_proj.bias", {8}, 216},
               {"post_attention_layernorm.weight", {8}, 224},
               {"mlp.gate_proj.weight", {12, 8}, 232},
               {"mlp.gate_proj.bias", {12}, 328},
               {"mlp.up_proj.weight", {12, 8}, 340},
               {"mlp.up_proj.bias", {12}, 436},
               {"mlp.down_proj.weight", {8, 12}, 448},
               {"mlp.down_proj.bias", {8}, 544}});
  CHECK(l.decoder.o_bias == 216);
  CHECK(l.decoder.gate_bias == 328);
  CHECK(l.decoder.up_bias == 436);
  CHECK(l.decoder.down_bias == 544);
  CHECK(l.largest_region_numel == 552);
}

TEST_CASE("layouts name exactly the tensors transformers saved for the golden fixtures", "[param_layout]") {
  const fs::path fixtures = fs::path(MEGATRAIN_SOURCE_DIR) / "tests" / "fixtures";
  for (const char* name : {"llama", "qwen2", "qwen3", "mistral"}) {
    INFO(name);
    const fs::path dir = fixtures / name / "model";
    const mt::ModelSpec spec = mt::load_model_spec(dir / "config.json");
    const mt::ParamLayout layout = mt::make_param_layout(spec);
    const mt::SafetensorsModel weights(dir);
    size_t slots = 0;
    for (const mt::Region& r : layout.regions) {
      std::vector<float> values(static_cast<size_t>(r.numel));
      mt::load_region(r, weights, values.data());  // throws on a missing or mis-shaped tensor
      slots += r.params.size();
    }
    CHECK(slots == weights.names().size());
    CHECK(layout.total_numel == mt::count_parameters(spec));
  }
}
