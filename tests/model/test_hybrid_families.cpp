// The hybrid linear-attention families: what the Qwen3.5 / Qwen3-Next parsers read into per-layer specs (DeltaNet or
// gated attention by layer_types or full_attention_interval), their param layouts, and their one-line refusals.
#include <nlohmann/json.hpp>

#include "catch.h"
#include "core/error.h"
#include "model/flops.h"
#include "model/model_spec.h"
#include "model/param_layout.h"

using nlohmann::json;

namespace {

json qwen3_5(const char* architecture = "Qwen3_5ForCausalLM") {
  return {{"architectures", {architecture}},  {"vocab_size", 128},        {"hidden_size", 64},
          {"intermediate_size", 96},          {"num_hidden_layers", 8},   {"num_attention_heads", 4},
          {"num_key_value_heads", 2},         {"head_dim", 32},           {"max_position_embeddings", 256},
          {"linear_num_key_heads", 2},        {"linear_num_value_heads", 4}, {"linear_key_head_dim", 16},
          {"linear_value_head_dim", 8},       {"linear_conv_kernel_dim", 4}};
}

std::string parse_error(const json& j) {
  try {
    mt::parse_model_spec(j, "cfg.json");
  } catch (const mt::Error& e) {
    return e.what();
  }
  return "(no error)";
}
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("Qwen3.5: every fourth layer gated full attention, the others Gated DeltaNet", "[families][hybrid]") {
  const mt::ModelSpec s = mt::parse_model_spec(qwen3_5(), "cfg.json");
  CHECK(s.family == "qwen3_5_text");
  CHECK(s.norm_style == mt::NormStyle::one_plus_weight);
  CHECK(s.rope_tables.front().rot_dim() == 8);  // partial_rotary_factor 0.25 of head_dim 32 by default
  for (size_t i = 0; i < s.layers.size(); ++i) {
    INFO("layer " << i);
    const mt::LayerSpec& l = s.layers[i];
    CHECK(l.is_deltanet() == (i % 4 != 3));
    if (l.is_deltanet()) {
      CHECK(l.deltanet.conv_dim() == 2 * 2 * 16 + 4 * 8);
      CHECK(l.attention.q_dim() == 0);
    } else {
      CHECK(l.attention.output_gate);
      CHECK(l.attention.qk_norm);
    }
  }
  const mt::ParamLayout layout = mt::make_param_layout(s);
  std::vector<std::string> names;
  for (const auto& p : layout.layer(0).params) names.push_back(p.hf_name.substr(std::string("model.layers.0.").size()));
  CHECK(names == std::vector<std::string>{"input_layernorm.weight", "linear_attn.in_proj_qkv.weight",
                                          "linear_attn.in_proj_z.weight", "linear_attn.in_proj_b.weight",
                                          "linear_attn.in_proj_a.weight", "linear_attn.conv1d.weight",
                                          "linear_attn.dt_bias", "linear_attn.A_log", "linear_attn.norm.weight",
                                          "linear_attn.out_proj.weight", "post_attention_layernorm.weight",
                                          "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"});
  const mt::Region& full = layout.layer(3);
  CHECK(full.params[1].hf_name == "model.layers.3.self_attn.q_proj.weight");
  CHECK(full.params[1].shape == std::vector<int64_t>{2 * 4 * 32, 64});  // query and gate rows per head
  CHECK(full.params[1].rows.groups == 4);
  CHECK(full.offsets.attention.out_gate == full.offsets.attention.q + 4 * 32 * 64);
  CHECK(layout.layer(0).params[0].init == mt::InitKind::zeros);  // (1 + w) norms start at zero
}

TEST_CASE("Qwen3-Next: fused projections grouped by k head; MoE configs refused until the MoE block",
          "[families][hybrid]") {
  json j = qwen3_5("Qwen3NextForCausalLM");
  j["num_experts"] = 0;
  const mt::ModelSpec s = mt::parse_model_spec(j, "cfg.json");
  const mt::ParamLayout layout = mt::make_param_layout(s);
  const mt::Region& r = layout.layer(0);
  CHECK(r.params[1].hf_name == "model.layers.0.linear_attn.in_proj_qkvz.weight");
  CHECK(r.params[1].rows.parts == std::vector<int64_t>{16, 16, 16, 16});  // per k head: q, k, 2 v heads, 2 z heads
  CHECK(r.params[2].rows.parts == std::vector<int64_t>{2, 2});            // per k head: 2 b heads, 2 a heads
  j.erase("num_experts");
  CHECK(has(parse_error(j), "Qwen3NextForCausalLM has mixture-of-experts feed-forward layers (num_experts 512)"));
  j["num_experts"] = 8;
  j["mlp_only_layers"] = {0, 1, 2, 3, 4, 5, 6, 7};
  CHECK(parse_error(j) == "(no error)");
  CHECK(has(parse_error(qwen3_5("Qwen3_5MoeForCausalLM")), "needs the MoE feed-forward block"));
  const json moe_cg = {{"architectures", {"Qwen3_5MoeForConditionalGeneration"}}, {"text_config", qwen3_5()}};
  CHECK(has(parse_error(moe_cg), "Qwen3_5MoeForConditionalGeneration has mixture-of-experts feed-forward layers "
                                 "(text_config.num_experts 256)"));
}

TEST_CASE("Qwen3.5 bad configs: one line naming the file and the field", "[families][hybrid]") {
  json j = qwen3_5();
  j["layer_types"] = {"linear_attention", "full_attention"};
  CHECK(parse_error(j) ==
        "model config cfg.json: key 'layer_types' must list 8 layer types (num_hidden_layers), got 2");
  j["layer_types"] = json::array();
  for (int i = 0; i < 8; ++i) j["layer_types"].push_back(i == 5 ? "sliding_attention" : "linear_attention");
  CHECK(parse_error(j) == "model config cfg.json: key 'layer_types' entry 5 must be linear_attention or "
                          "full_attention, got \"sliding_attention\"");
  j = qwen3_5();
  j["linear_num_value_heads"] = 3;
  CHECK(parse_error(j) ==
        "model config cfg.json: key 'linear_num_value_heads' (3) is not a multiple of linear_num_key_heads (2)");
  j = qwen3_5("Qwen3_5ForConditionalGeneration");
  CHECK(parse_error(j) == "model config cfg.json: Qwen3_5ForConditionalGeneration needs 'text_config'");
  json cg = {{"architectures", {"Qwen3_5ForConditionalGeneration"}}, {"text_config", qwen3_5()}};
  cg["text_config"]["linear_key_head_dim"] = 0;
  CHECK(parse_error(cg) == "model config cfg.json: key 'text_config.linear_key_head_dim' must be positive, got 0");
}

TEST_CASE("model FLOPs of a hybrid stack: the DeltaNet layers' state updates and conv beside attention",
          "[families][hybrid]") {
  const mt::ModelSpec s = mt::parse_model_spec(qwen3_5(), "cfg.json");
  const mt::ParamLayout layout = mt::make_param_layout(s);
  const int64_t tokens = 1000, seq = 250;
  double matmul = 0;
  for (size_t r = 1; r < layout.regions.size(); ++r)
    for (const auto& p : layout.regions[r].params)
      if (p.shape.size() == 2) matmul += static_cast<double>(p.numel);  // the conv weight [C, 1, K] is not one
  const double deltanet = 18.0 * 4 * 16 * 8 + 6.0 * (2 * 2 * 16 + 4 * 8) * 4;  // per token and DeltaNet layer
  const double attention = 12.0 * 4 * 32 * seq;                                 // per token and attention layer
  const mt::StepFlops f = mt::step_flops(s, layout, tokens, seq);
  CHECK(f.model == 6.0 * matmul * tokens + (6 * deltanet + 2 * attention) * tokens);
  CHECK(f.six_n == 6.0 * static_cast<double>(layout.total_numel) * tokens);
}
