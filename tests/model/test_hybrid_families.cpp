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

TEST_CASE("Qwen3-Next: fused projections grouped by k head; num_experts 0 dense", "[families][hybrid]") {
  json j = qwen3_5("Qwen3NextForCausalLM");
  j["num_experts"] = 0;
  const mt::ModelSpec s = mt::parse_model_spec(j, "cfg.json");
  for (const mt::LayerSpec& l : s.layers) CHECK_FALSE(l.moe.active());
  const mt::ParamLayout layout = mt::make_param_layout(s);
  const mt::Region& r = layout.layer(0);
  CHECK(r.params[1].hf_name == "model.layers.0.linear_attn.in_proj_qkvz.weight");
  CHECK(r.params[1].rows.parts == std::vector<int64_t>{16, 16, 16, 16});  // per k head: q, k, 2 v heads, 2 z heads
  CHECK(r.params[2].rows.parts == std::vector<int64_t>{2, 2});            // per k head: 2 b heads, 2 a heads
}

TEST_CASE("Qwen3-Next expert layers: decoder_sparse_step, mlp_only_layers, shared gated expert, per-expert names",
          "[families][hybrid][moe]") {
  json j = qwen3_5("Qwen3NextForCausalLM");
  const mt::ModelSpec defaults = mt::parse_model_spec(j, "cfg.json");  // the config class's 512 experts, top 10
  CHECK(defaults.layers[0].moe.num_experts == 512);
  CHECK(defaults.layers[0].moe.top_k == 10);
  CHECK(defaults.layers[0].moe.intermediate_size == 512);
  CHECK(defaults.layers[0].moe.shared_intermediate_size == 512);
  CHECK(defaults.layers[0].moe.norm_topk);
  j["num_experts"] = 8;
  j["num_experts_per_tok"] = 2;
  j["moe_intermediate_size"] = 24;
  j["shared_expert_intermediate_size"] = 40;
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = {3};
  j["norm_topk_prob"] = false;
  j["output_router_logits"] = true;
  j["router_aux_loss_coef"] = 0.01;
  const mt::ModelSpec s = mt::parse_model_spec(j, "cfg.json");
  for (size_t i = 0; i < s.layers.size(); ++i) {
    INFO("layer " << i);
    CHECK(s.layers[i].moe.active() == (i % 2 == 1 && i != 3));
  }
  const mt::MoeSpec& m = s.layers[1].moe;
  CHECK(m.norm_topk == false);
  CHECK(m.shared_gate);
  CHECK(m.shared_intermediate_size == 40);
  CHECK(s.layers[0].mlp.intermediate_size == 96);
  CHECK(s.output_router_logits);
  CHECK(s.router_aux_loss_coef == 0.01);
  const mt::ParamLayout layout = mt::make_param_layout(s);
  const mt::Region& r = layout.layer(1);
  const auto slot = [&](const std::string& name) {
    for (const auto& p : r.params)
      if (p.hf_name == "model.layers.1." + name) return p.shape;
    return std::vector<int64_t>{};
  };
  CHECK(slot("mlp.gate.weight") == std::vector<int64_t>{8, 64});
  CHECK(slot("mlp.experts.7.down_proj.weight") == std::vector<int64_t>{64, 24});
  CHECK(slot("mlp.shared_expert.up_proj.weight") == std::vector<int64_t>{40, 64});
  CHECK(slot("mlp.shared_expert_gate.weight") == std::vector<int64_t>{1, 64});
  CHECK(r.offsets.moe.down_stride == r.offsets.moe.expert_stride);
  j["mlp_only_layers"] = {9};
  CHECK(has(parse_error(j), "key 'mlp_only_layers' entry 9 is not a layer index below 8"));
}

TEST_CASE("Qwen3.5-MoE: every layer sparse with a gated shared expert; the fused expert tensors of the published "
          "checkpoints or one per expert, whichever the weights use", "[families][hybrid][moe]") {
  json j = qwen3_5("Qwen3_5MoeForCausalLM");
  j.erase("intermediate_size");  // Qwen3_5MoeTextConfig has none
  j["num_experts"] = 4;
  j["num_experts_per_tok"] = 2;
  j["moe_intermediate_size"] = 24;
  j["norm_topk_prob"] = false;  // not a key of this family: it always renormalises
  mt::ModelSpec s = mt::parse_model_spec(j, "cfg.json");
  CHECK(s.family == "qwen3_5_moe_text");
  for (const mt::LayerSpec& l : s.layers) {
    CHECK(l.moe.active());
    CHECK(l.moe.norm_topk);
    CHECK(l.moe.shared_intermediate_size == 512);  // the config class's default
    CHECK(l.moe.shared_gate);
  }
  CHECK(s.rope_tables.front().rot_dim() == 8);
  CHECK(s.names.fused_experts);
  mt::ParamLayout layout = mt::make_param_layout(s);
  const double fused_flops = mt::step_flops(s, layout, 512, 256).model;
  const mt::Region& r = layout.layer(0);
  const auto find = [](const mt::Region& region, const std::string& name) -> const mt::ParamSlot* {
    for (const auto& p : region.params)
      if (p.hf_name == name) return &p;
    return nullptr;
  };
  const mt::ParamSlot* gate_up = find(r, "model.layers.0.mlp.experts.gate_up_proj");
  const mt::ParamSlot* down = find(r, "model.layers.0.mlp.experts.down_proj");
  REQUIRE(gate_up != nullptr);
  REQUIRE(down != nullptr);
  CHECK(gate_up->shape == std::vector<int64_t>{4, 48, 64});
  CHECK(down->shape == std::vector<int64_t>{4, 64, 24});
  const mt::MoeOffsets& o = r.offsets.moe;
  CHECK(o.gate_of(1) == gate_up->offset + 48 * 64);
  CHECK(o.up_of(1) == gate_up->offset + 48 * 64 + 24 * 64);
  CHECK(o.down_of(3) == down->offset + 3 * 64 * 24);
  CHECK(mt::count_parameters(s) - mt::count_active_parameters(s) == 8 * 2 * 3 * 24 * 64);
  // Weights saved by save_pretrained (one tensor per expert): the layout follows them.
  mt::match_tensor_names(s, [](const std::string& name) { return name == "model.layers.0.mlp.experts.0.gate_proj.weight"; });
  CHECK_FALSE(s.names.fused_experts);
  layout = mt::make_param_layout(s);
  CHECK(find(layout.layer(0), "model.layers.0.mlp.experts.3.up_proj.weight") != nullptr);
  CHECK(mt::step_flops(s, layout, 512, 256).model == fused_flops);  // the fused tensors are matmul parameters too
  mt::match_tensor_names(s, [](const std::string& name) { return name == "model.layers.0.mlp.experts.gate_up_proj"; });
  CHECK(s.names.fused_experts);

  // The conditional-generation directory: Qwen3_5MoeTextConfig's defaults where text_config leaves them out.
  const json cg = {{"architectures", {"Qwen3_5MoeForConditionalGeneration"}},
                   {"text_config", {{"output_router_logits", true}, {"router_aux_loss_coef", 0.02}}}};
  const mt::ModelSpec big = mt::parse_model_spec(cg, "cfg.json");
  CHECK(big.hidden_size == 2048);
  CHECK(big.num_layers == 40);
  CHECK(big.layers[3].attention.num_kv_heads == 2);
  CHECK(big.layers[0].moe.num_experts == 256);
  CHECK(big.layers[0].moe.top_k == 8);
  CHECK(big.output_router_logits);
  CHECK(big.router_aux_loss_coef == 0.02);
  CHECK(big.names.layer_prefix == "model.language_model.layers.");
  json bad = cg;
  bad["text_config"]["num_experts"] = 4;
  bad["text_config"]["num_experts_per_tok"] = 9;
  CHECK(parse_error(bad) == "model config cfg.json: key 'text_config.num_experts_per_tok' (9) must be between 1 and "
                            "'num_experts' (4)");
  bad["text_config"]["num_experts_per_tok"] = 2;
  bad["text_config"]["router_aux_loss_coef"] = -1.0;
  CHECK(parse_error(bad) == "model config cfg.json: key 'text_config.router_aux_loss_coef' must not be negative");
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

namespace {

json minimax() {
  return {{"architectures", {"MiniMaxForCausalLM"}}, {"vocab_size", 128},       {"hidden_size", 64},
          {"intermediate_size", 48},                 {"num_hidden_layers", 4},  {"num_attention_heads", 4},
          {"num_key_value_heads", 2},                {"head_dim", 16},          {"max_position_embeddings", 256},
          {"num_local_experts", 4},                  {"num_experts_per_tok", 2}};
}

}  // namespace

TEST_CASE("MiniMax: lightning attention between softmax layers, residuals from the norms, Mixtral's experts",
          "[families][hybrid][minimax]") {
  json j = minimax();
  j["layer_types"] = {"linear_attention", "linear_attention", "full_attention", "linear_attention"};
  j["full_attn_alpha_factor"] = 3.5565588200778455;
  j["linear_attn_beta_factor"] = 0.5;
  j["mlp_alpha_factor"] = 2.0;
  const mt::ModelSpec s = mt::parse_model_spec(j, "cfg.json");
  CHECK(s.family == "minimax");
  CHECK(s.rope_tables.front().theta == 1e6);  // MiniMaxConfig's default_theta
  CHECK(s.rope_tables.front().rot_dim() == 16);
  for (size_t i = 0; i < s.layers.size(); ++i) {
    INFO("layer " << i);
    const mt::LayerSpec& l = s.layers[i];
    CHECK(l.is_lightning() == (i != 2));
    CHECK(l.normed_residual);
    CHECK(l.moe.num_experts == 4);
    CHECK(l.moe.norm_topk);
    CHECK(l.ffn_residual.alpha == 2.0);
    CHECK(l.ffn_residual.beta == 1.0);
    if (l.is_lightning()) {
      CHECK(l.lightning.width() == 64);
      CHECK(l.lightning.decay_factor == 1.0 - static_cast<double>(i) / (3.0 + 1e-5) + 1e-5);
      CHECK(l.mixer_residual.beta == 0.5);
      CHECK(l.attention.rope == -1);
    } else {
      CHECK(l.mixer_residual.alpha == 3.5565588200778455);
      CHECK(l.attention.num_kv_heads == 2);
    }
  }
  const mt::ParamLayout layout = mt::make_param_layout(s);
  std::vector<std::string> names;
  for (const auto& p : layout.layer(0).params) names.push_back(p.hf_name.substr(std::string("model.layers.0.").size()));
  CHECK(std::vector<std::string>(names.begin(), names.begin() + 7) ==
        std::vector<std::string>{"input_layernorm.weight", "self_attn.qkv_proj.weight", "self_attn.output_gate.weight",
                                 "self_attn.norm.weight", "self_attn.out_proj.weight", "post_attention_layernorm.weight",
                                 "block_sparse_moe.gate.weight"});
  CHECK(names[7] == "block_sparse_moe.experts.0.w1.weight");
  CHECK(layout.layer(0).params[1].shape == std::vector<int64_t>{3 * 64, 64});
  CHECK(layout.layer(0).params[3].init == mt::InitKind::ones);
  CHECK(layout.layer(2).params[1].hf_name == "model.layers.2.self_attn.q_proj.weight");
  // Default layer types: MiniMaxConfig's alternation, full attention first.
  const mt::ModelSpec alternating = mt::parse_model_spec(minimax(), "cfg.json");
  for (size_t i = 0; i < 4; ++i) CHECK(alternating.layers[i].is_lightning() == (i % 2 == 1));
}

TEST_CASE("MiniMax: the remote code's keys (attn_type_list, layernorm_* factors, rotary_dim)",
          "[families][hybrid][minimax]") {
  json j = minimax();
  j["attn_type_list"] = {0, 0, 0, 1};
  j["layernorm_full_attention_alpha"] = 3.5;
  j["layernorm_mlp_beta"] = 0.25;
  j["rotary_dim"] = 8;
  j["postnorm"] = true;
  const mt::ModelSpec s = mt::parse_model_spec(j, "cfg.json");
  CHECK(s.layers[3].attention.num_heads == 4);
  CHECK(s.layers[0].is_lightning());
  CHECK(s.layers[3].mixer_residual.alpha == 3.5);
  CHECK(s.layers[0].ffn_residual.beta == 0.25);
  CHECK(s.rope_tables.front().rot_dim() == 8);  // MiniMax-Text-01 rotates 64 of 128
}

TEST_CASE("MiniMax: bad configs are refused in one line naming the key", "[families][hybrid][minimax]") {
  const auto with = [](const char* key, const json& value) {
    json j = minimax();
    j[key] = value;
    return parse_error(j);
  };
  CHECK(with("layer_types", json{"linear_attention", "full_attention"}) ==
        "model config cfg.json: key 'layer_types' must list 4 layer types (num_hidden_layers), got 2");
  CHECK(with("layer_types", json{"linear_attention", "sliding_attention", "full_attention", "full_attention"}) ==
        "model config cfg.json: key 'layer_types' entry 1 must be linear_attention or full_attention, got "
        "\"sliding_attention\"");
  CHECK(with("attn_type_list", json{0, 2, 1, 1}) ==
        "model config cfg.json: key 'attn_type_list' entry 1 must be 0 (linear) or 1 (full attention), got 2");
  CHECK(with("rotary_dim", 7) ==
        "model config cfg.json: key 'rotary_dim' (7) must be even and at most head_dim (16)");
  CHECK(with("postnorm", false).find("key 'postnorm' false") != std::string::npos);
  CHECK(with("shared_intermediate_size", 128) ==
        "model config cfg.json: key 'shared_intermediate_size' must be 0 (MiniMaxForCausalLM has no shared expert)");
  CHECK(with("router_jitter_noise", 0.01).find("key 'router_jitter_noise' must be 0") != std::string::npos);
  CHECK(with("block_size", 0) == "model config cfg.json: key 'block_size' must be positive");
  CHECK(with("num_experts_per_tok", 5).find("num_experts_per_tok") != std::string::npos);
  CHECK(with("mlp_alpha_factor", "x") == "model config cfg.json: key 'mlp_alpha_factor' must be a number, got \"x\"");
  json j = minimax();
  j["hidden_size"] = 66;
  j.erase("head_dim");
  CHECK(parse_error(j).find("hidden_size (66) is not a multiple of num_attention_heads (4)") != std::string::npos);
}

TEST_CASE("MiniMax: FLOPs count the lightning sweeps", "[families][hybrid][minimax]") {
  json j = minimax();
  j["layer_types"] = {"linear_attention", "full_attention", "linear_attention", "linear_attention"};
  const mt::ModelSpec s = mt::parse_model_spec(j, "cfg.json");
  CHECK(mt::mixer_flops_per_token(s.layers[0], 4096) == 16.0 * 4 * 16 * 16);  // independent of the length
  CHECK(mt::mixer_flops_per_token(s.layers[1], 4096) == 6.0 * 4 * (16 + 16) * 4096);
}
