// The LayerNorm family parsers (StarCoder2, Cohere, Cohere2): what each reads from config.json into per-layer specs,
// the shipped shapes' parameter counts (transformers' models of those configs, counted on the meta device, tied
// embeddings once), and one-line errors naming the config and the key.
#include <nlohmann/json.hpp>

#include "catch.h"
#include "core/error.h"
#include "model/model_spec.h"
#include "model/param_layout.h"

using nlohmann::json;

namespace {

json tiny(const char* architecture) {
  return {{"architectures", {architecture}}, {"vocab_size", 128},      {"hidden_size", 64},
          {"intermediate_size", 96},        {"num_hidden_layers", 4}, {"num_attention_heads", 4},
          {"num_key_value_heads", 2},       {"max_position_embeddings", 256}};
}

mt::ModelSpec parse(const json& j) { return mt::parse_model_spec(j, "cfg.json"); }

std::string parse_error(const json& j) {
  try {
    parse(j);
  } catch (const mt::Error& e) {
    return e.what();
  }
  return "(no error)";
}

mt::ModelSpec shipped(const std::string& name) {
  return mt::load_model_spec(std::string(MEGATRAIN_SOURCE_DIR "/configs/models/") + name + ".json");
}

std::vector<std::string> names(const mt::Region& r) {
  std::vector<std::string> out;
  for (const mt::ParamSlot& p : r.params) out.push_back(p.hf_name);
  return out;
}

}  // namespace

TEST_CASE("StarCoder2: LayerNorm with bias, biases everywhere, non-gated MLP c_fc/c_proj, sliding window",
          "[families][layernorm]") {
  json j = tiny("Starcoder2ForCausalLM");
  j["sliding_window"] = 16;
  const mt::ModelSpec s = parse(j);
  CHECK(s.norm_kind == mt::NormKind::layer_with_bias);
  CHECK(s.tie_word_embeddings);
  CHECK(s.rms_norm_eps == 1e-5);
  for (const mt::LayerSpec& l : s.layers) {
    CHECK(l.attention.window == 16);
    CHECK((l.attention.qkv_bias && l.attention.o_bias && l.mlp.bias));
    CHECK(!l.mlp.gated);
    CHECK(l.mlp.activation == mt::Activation::gelu_tanh);
    CHECK(!l.parallel_residual);
  }
  const mt::ParamLayout layout = mt::make_param_layout(s);
  const std::vector<std::string> expected = {
      "model.layers.0.input_layernorm.weight",          "model.layers.0.input_layernorm.bias",
      "model.layers.0.self_attn.q_proj.weight",         "model.layers.0.self_attn.q_proj.bias",
      "model.layers.0.self_attn.k_proj.weight",         "model.layers.0.self_attn.k_proj.bias",
      "model.layers.0.self_attn.v_proj.weight",         "model.layers.0.self_attn.v_proj.bias",
      "model.layers.0.self_attn.o_proj.weight",         "model.layers.0.self_attn.o_proj.bias",
      "model.layers.0.post_attention_layernorm.weight", "model.layers.0.post_attention_layernorm.bias",
      "model.layers.0.mlp.c_fc.weight",                 "model.layers.0.mlp.c_fc.bias",
      "model.layers.0.mlp.c_proj.weight",               "model.layers.0.mlp.c_proj.bias"};
  CHECK(names(layout.layer(0)) == expected);
  CHECK(names(layout.head_region()) == std::vector<std::string>{"model.norm.weight", "model.norm.bias"});
  CHECK(layout.layer(0).params[1].init == mt::InitKind::zeros);
  CHECK(!layout.layer(0).params[1].weight_decay);
  j.erase("sliding_window");
  CHECK(parse(j).layers.front().attention.window == 0);
  j["use_bias"] = false;
  CHECK(!parse(j).layers.front().mlp.bias);
}

TEST_CASE("Cohere: parallel residual, LayerNorm without bias, interleaved RoPE, logit scale, per-head q/k LayerNorm",
          "[families][layernorm]") {
  json j = tiny("CohereForCausalLM");
  j["use_qk_norm"] = true;
  j["logit_scale"] = 0.25;
  const mt::ModelSpec s = parse(j);
  CHECK(s.norm_kind == mt::NormKind::layer);
  CHECK(s.logit_scale == 0.25);
  CHECK(s.tie_word_embeddings);
  CHECK(s.rope_tables.front().interleaved);
  CHECK(s.rope_tables.front().theta == 500000.0);
  for (const mt::LayerSpec& l : s.layers) CHECK((l.parallel_residual && l.attention.qk_layer_norm && l.mlp.gated));
  const mt::ParamLayout layout = mt::make_param_layout(s);
  const std::vector<std::string> expected = {
      "model.layers.0.input_layernorm.weight", "model.layers.0.self_attn.q_proj.weight",
      "model.layers.0.self_attn.k_proj.weight", "model.layers.0.self_attn.v_proj.weight",
      "model.layers.0.self_attn.o_proj.weight", "model.layers.0.self_attn.q_norm.weight",
      "model.layers.0.self_attn.k_norm.weight", "model.layers.0.mlp.gate_proj.weight",
      "model.layers.0.mlp.up_proj.weight",      "model.layers.0.mlp.down_proj.weight"};
  CHECK(names(layout.layer(0)) == expected);
  CHECK(layout.layer(0).params[5].shape == std::vector<int64_t>{4, 16});
  CHECK(layout.layer(0).params[6].shape == std::vector<int64_t>{2, 16});
  CHECK(names(layout.head_region()) == std::vector<std::string>{"model.norm.weight"});
}

TEST_CASE("Cohere2: sliding layers with RoPE, global layers without, head_dim from hidden_size",
          "[families][layernorm]") {
  json j = tiny("Cohere2ForCausalLM");
  j["head_dim"] = 8;  // Cohere2Config overrides it with hidden_size / num_attention_heads
  j["sliding_window"] = 32;
  const mt::ModelSpec s = parse(j);
  std::vector<int64_t> windows;
  std::vector<int> ropes;
  for (const mt::LayerSpec& l : s.layers) {
    windows.push_back(l.attention.window);
    ropes.push_back(l.attention.rope);
    CHECK(l.attention.head_dim == 16);
    CHECK((l.parallel_residual && !l.attention.qk_layer_norm));
  }
  CHECK(windows == std::vector<int64_t>{32, 32, 32, 0});
  CHECK(ropes == std::vector<int>{0, 0, 0, -1});
  j["sliding_window_pattern"] = 2;
  CHECK(parse(j).layers[1].attention.rope == -1);
  j["layer_types"] = {"full_attention", "sliding_attention", "sliding_attention", "full_attention"};
  CHECK(parse(j).layers[0].attention.window == 0);
  CHECK(parse(j).layers[1].attention.window == 32);
  j["sliding_window"] = nullptr;  // every layer global, none rotated
  for (const mt::LayerSpec& l : parse(j).layers) CHECK((l.attention.window == 0 && l.attention.rope == -1));
}

TEST_CASE("shipped LayerNorm-family shapes have transformers' parameter counts", "[families][layernorm]") {
  CHECK(mt::count_parameters(shipped("starcoder2-15b")) == 15655899136);
  CHECK(mt::count_parameters(shipped("c4ai-command-r-v01")) == 34980831232);
  CHECK(mt::count_parameters(shipped("c4ai-command-r-plus")) == 103810674688);
  CHECK(mt::count_parameters(shipped("c4ai-command-r7b-12-2024")) == 8028033024);
  CHECK(mt::count_parameters(shipped("aya-expanse-8b")) == 8028033024);  // Cohere v1 at R7B's shape, RoPE everywhere
  const mt::ModelSpec r7b = shipped("c4ai-command-r7b-12-2024");
  CHECK(r7b.layers[2].attention.window == 4096);
  CHECK(r7b.layers[3].attention.rope == -1);
}

TEST_CASE("bad LayerNorm-family keys are refused naming the config and the key", "[families][layernorm]") {
  json j = tiny("CohereForCausalLM");
  j["logit_scale"] = 0;
  CHECK(parse_error(j) == "model config cfg.json: key 'logit_scale' must be a positive number, got 0");
  j["logit_scale"] = "big";
  CHECK(parse_error(j) == "model config cfg.json: key 'logit_scale' must be a number, got \"big\"");
  j = tiny("CohereForCausalLM");
  j["use_qk_norm"] = 1;
  CHECK(parse_error(j) == "model config cfg.json: key 'use_qk_norm' must be true or false, got 1");
  j = tiny("CohereForCausalLM");
  j["layer_norm_eps"] = -1.0;
  CHECK(parse_error(j) == "model config cfg.json: key 'layer_norm_eps' must be positive");
  j = tiny("Cohere2ForCausalLM");
  j["sliding_window_pattern"] = 0;
  CHECK(parse_error(j) == "model config cfg.json: key 'sliding_window_pattern' must be positive, got 0");
  j = tiny("Starcoder2ForCausalLM");
  j["use_bias"] = "yes";
  CHECK(parse_error(j) == "model config cfg.json: key 'use_bias' must be true or false, got \"yes\"");
  j = tiny("Starcoder2ForCausalLM");
  j["sliding_window"] = 0;
  CHECK(parse_error(j) == "model config cfg.json: key 'sliding_window' must be positive or null");
  j = tiny("Starcoder2ForCausalLM");
  j["hidden_act"] = "relu";
  CHECK(parse_error(j) ==
        "model config cfg.json: key 'hidden_act' is 'relu'; supported: silu, gelu_pytorch_tanh");
}
