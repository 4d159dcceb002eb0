// The mixture-of-experts family parsers: what Mixtral, Qwen2-MoE and Qwen3-MoE read into per-layer MoE specs (layer
// mixing by mlp_only_layers / decoder_sparse_step), their tensor layout, active against total parameters (the
// published shapes' model-card figures), and one-line errors naming the config and the key.
#include <nlohmann/json.hpp>

#include "catch.h"
#include "core/error.h"
#include "model/flops.h"
#include "model/model_spec.h"
#include "model/param_layout.h"

using nlohmann::json;

namespace {

json tiny(const char* architecture) {
  return {{"architectures", {architecture}}, {"vocab_size", 128},         {"hidden_size", 64},
          {"intermediate_size", 96},        {"num_hidden_layers", 4},    {"num_attention_heads", 4},
          {"num_key_value_heads", 2},       {"max_position_embeddings", 256}, {"num_experts_per_tok", 2},
          {"moe_intermediate_size", 32},    {"shared_expert_intermediate_size", 48}, {"num_experts", 4}};
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
std::vector<bool> sparse(const mt::ModelSpec& s) {
  std::vector<bool> v;
  for (const auto& l : s.layers) v.push_back(l.moe.active());
  return v;
}

}  // namespace

TEST_CASE("Mixtral: every layer a renormalised top-2 of num_local_experts, block_sparse_moe names", "[families][moe]") {
  json j = tiny("MixtralForCausalLM");
  j.erase("num_experts");
  j["num_local_experts"] = 8;
  const mt::ModelSpec s = parse(j);
  CHECK(sparse(s) == std::vector<bool>(4, true));
  CHECK(s.layers[0].moe.num_experts == 8);
  CHECK(s.layers[0].moe.intermediate_size == 96);  // Mixtral's experts are intermediate_size wide
  CHECK(s.layers[0].moe.norm_topk);
  CHECK(s.layers[0].moe.shared_intermediate_size == 0);
  CHECK(s.router_aux_loss_coef == 0.001);
  CHECK_FALSE(s.output_router_logits);
  const mt::ParamLayout layout = mt::make_param_layout(s);
  const auto& names = layout.layer(1).params;
  CHECK(std::any_of(names.begin(), names.end(), [](const mt::ParamSlot& p) {
    return p.hf_name == "model.layers.1.block_sparse_moe.experts.7.w2.weight" && p.shape == std::vector<int64_t>{64, 96};
  }));
  const mt::MoeOffsets& o = layout.layer(1).offsets.moe;
  CHECK(o.expert_stride == 3 * 96 * 64);
  CHECK(layout.layer(1).params.back().offset + layout.layer(1).params.back().numel == layout.layer(1).numel);
  j["router_jitter_noise"] = 0.1;
  CHECK_THAT(parse_error(j), mt_test::contains("cfg.json: key 'router_jitter_noise' must be 0"));
}

TEST_CASE("Qwen2-MoE: decoder_sparse_step and mlp_only_layers mix dense and sparse layers; gated shared expert",
          "[families][moe]") {
  json j = tiny("Qwen2MoeForCausalLM");
  j["decoder_sparse_step"] = 2;
  const mt::ModelSpec s = parse(j);
  CHECK(sparse(s) == std::vector<bool>{false, true, false, true});
  CHECK(s.layers[0].mlp.intermediate_size == 96);
  CHECK(s.layers[1].moe.shared_intermediate_size == 48);
  CHECK(s.layers[1].moe.shared_gate);
  CHECK_FALSE(s.layers[1].moe.norm_topk);
  CHECK(s.layers[1].attention.qkv_bias);
  j["decoder_sparse_step"] = 1;
  j["mlp_only_layers"] = {0, 3};
  j["output_router_logits"] = true;
  const mt::ModelSpec m = parse(j);
  CHECK(sparse(m) == std::vector<bool>{false, true, true, false});
  CHECK(m.output_router_logits);
  // Active parameters: each sparse layer computes with 2 of its 4 experts.
  CHECK(mt::count_parameters(m) - mt::count_active_parameters(m) == 2 * 2 * 3 * 32 * 64);
  j["mlp_only_layers"] = {4};
  CHECK_THAT(parse_error(j), mt_test::contains("cfg.json: key 'mlp_only_layers' entry 4 is not a layer index below 4"));
}

TEST_CASE("Qwen3-MoE: q/k norms, norm_topk_prob, no shared expert; top k above the experts refused", "[families][moe]") {
  json j = tiny("Qwen3MoeForCausalLM");
  j["norm_topk_prob"] = true;
  const mt::ModelSpec s = parse(j);
  CHECK(s.layers[2].attention.qk_norm);
  CHECK(s.layers[2].moe.norm_topk);
  CHECK(s.layers[2].moe.shared_intermediate_size == 0);
  j["num_experts_per_tok"] = 5;
  CHECK_THAT(parse_error(j),
             mt_test::contains("cfg.json: key 'num_experts_per_tok' (5) must be between 1 and 'num_experts' (4)"));
}

TEST_CASE("GLM-4.5: first_k_dense_replace, sigmoid group-limited router, scaling, shared experts, score bias slot",
          "[families][moe]") {
  json j = tiny("Glm4MoeForCausalLM");
  j.erase("num_experts");
  j["n_routed_experts"] = 8;
  j["n_group"] = 4;
  j["topk_group"] = 2;
  j["routed_scaling_factor"] = 2.5;
  j["n_shared_experts"] = 2;
  j["first_k_dense_replace"] = 2;
  const mt::ModelSpec s = parse(j);
  CHECK(sparse(s) == std::vector<bool>{false, false, true, true});
  const mt::MoeSpec& m = s.layers[3].moe;
  CHECK(m.router == mt::RouterKind::sigmoid_group);
  CHECK(m.norm_topk);
  CHECK(m.routed_scaling == 2.5);
  CHECK(m.groups == 4);
  CHECK(m.topk_groups == 2);
  CHECK(m.shared_intermediate_size == 64);
  CHECK_FALSE(m.shared_gate);
  CHECK(s.rope_tables[0].partial_rotary_factor == 0.5);
  const mt::ParamLayout layout = mt::make_param_layout(s);
  const auto& slots = layout.layer(3).params;
  CHECK(std::any_of(slots.begin(), slots.end(), [](const mt::ParamSlot& p) {
    return p.hf_name == "model.layers.3.mlp.gate.e_score_correction_bias" && p.shape == std::vector<int64_t>{8};
  }));
  CHECK(std::any_of(slots.begin(), slots.end(), [](const mt::ParamSlot& p) {
    return p.hf_name == "model.layers.3.mlp.shared_experts.down_proj.weight";
  }));
  j["n_group"] = 3;
  CHECK_THAT(parse_error(j), mt_test::contains("cfg.json: key 'n_group' (3) must divide the 8 experts"));
  j["n_group"] = 4;
  j["topk_group"] = 1;
  j["num_experts_per_tok"] = 3;
  CHECK_THAT(parse_error(j), mt_test::contains("key 'num_experts_per_tok' (3) exceeds the 2 experts of 'topk_group' (1)"));
}

TEST_CASE("Llama 4: NoPE every 4th layer, chunked RoPE layers, interleaved MoE layers, fused expert tensors",
          "[families][moe][llama4]") {
  json j = tiny("Llama4ForCausalLM");
  j.erase("num_experts");
  j.update({{"num_local_experts", 4}, {"num_experts_per_tok", 1}, {"intermediate_size", 32},
            {"intermediate_size_mlp", 96}, {"interleave_moe_layer_step", 2}, {"attention_chunk_size", 16},
            {"attn_temperature_tuning", 4}, {"floor_scale", 8}, {"rope_theta", 500000.0}, {"head_dim", 16}});
  const mt::ModelSpec s = parse(j);
  CHECK(sparse(s) == std::vector<bool>{false, true, false, true});
  for (int64_t i = 0; i < 4; ++i) {
    INFO("layer " << i);
    const mt::LayerSpec& l = s.layers[static_cast<size_t>(i)];
    const bool nope = i == 3;
    CHECK((l.attention.rope < 0) == nope);
    CHECK(l.attention.qk_l2_norm == !nope);
    CHECK_FALSE(l.attention.qk_norm);
    CHECK(l.attention.chunk == (nope ? 0 : 16));
    CHECK(l.attention.temperature_floor_scale == (nope ? 8.0 : 0.0));
    CHECK(l.attention.temperature_attn_scale == (nope ? 0.1 : 0.0));
    if (l.moe.active()) {
      CHECK(l.moe.router == mt::RouterKind::sigmoid_group);
      CHECK(l.moe.weight_scales_input);
      CHECK(l.moe.top_k == 1);
      CHECK(l.moe.shared_intermediate_size == 32);
    } else {
      CHECK(l.mlp.intermediate_size == 96);
    }
  }
  CHECK(s.rope_tables[0].interleaved);
  CHECK(s.rope_tables[0].theta == 500000.0);
  const mt::ParamLayout layout = mt::make_param_layout(s);
  const auto& params = layout.layer(1).params;
  std::vector<std::string> names;
  for (const mt::ParamSlot& p : params) names.push_back(p.hf_name);
  CHECK(names == std::vector<std::string>{
                     "model.layers.1.input_layernorm.weight", "model.layers.1.self_attn.q_proj.weight",
                     "model.layers.1.self_attn.k_proj.weight", "model.layers.1.self_attn.v_proj.weight",
                     "model.layers.1.self_attn.o_proj.weight", "model.layers.1.post_attention_layernorm.weight",
                     "model.layers.1.feed_forward.router.weight", "model.layers.1.feed_forward.experts.gate_up_proj",
                     "model.layers.1.feed_forward.experts.down_proj",
                     "model.layers.1.feed_forward.shared_expert.gate_proj.weight",
                     "model.layers.1.feed_forward.shared_expert.up_proj.weight",
                     "model.layers.1.feed_forward.shared_expert.down_proj.weight"});
  CHECK(params[7].shape == std::vector<int64_t>{4, 64, 64});
  CHECK(params[8].shape == std::vector<int64_t>{4, 32, 64});
  CHECK((params[7].expert_columns.experts > 0 && params[8].expert_columns.experts > 0));
  const mt::MoeOffsets& o = layout.layer(1).offsets.moe;
  CHECK(o.expert_stride == 2 * 32 * 64);
  CHECK(o.down_stride == 32 * 64);
  CHECK(o.experts + o.down == params[8].offset);
  CHECK(layout.layer(0).params[6].hf_name == "model.layers.0.feed_forward.gate_proj.weight");
  // HF's [E, H, 2I] (x·W, gate | up columns) ↔ the store's per-expert [gate I | up I][H]: expert 1's up row 2,
  // column 5 is HF element [1][5][32 + 2].
  std::vector<float> hf(static_cast<size_t>(params[7].numel)), store(hf.size()), back(hf.size());
  for (size_t i = 0; i < hf.size(); ++i) hf[i] = static_cast<float>(i);
  mt::hf_rows_to_store(params[7], hf.data(), store.data());
  CHECK(store[static_cast<size_t>(1 * 64 * 64 + (32 + 2) * 64 + 5)] == hf[static_cast<size_t>((1 * 64 + 5) * 64 + 34)]);
  mt::store_rows_to_hf(params[7], store.data(), back.data());
  CHECK(back == hf);
  // Multimodal checkpoints: the text tower under language_model.*.
  const json mm = {{"architectures", {"Llama4ForConditionalGeneration"}}, {"text_config", j}};
  const mt::ModelSpec t = parse(mm);
  CHECK(t.carries_other_tensors);
  CHECK(mt::make_param_layout(t).layer(1).params[7].hf_name ==
        "language_model.model.layers.1.feed_forward.experts.gate_up_proj");
  CHECK(mt::make_param_layout(t).head_region().params[1].hf_name == "language_model.lm_head.weight");
  // Bad input: one line naming the file and the key.
  json bad = j;
  bad["no_rope_layers"] = {1, 0};
  CHECK_THAT(parse_error(bad), mt_test::contains("cfg.json: key 'no_rope_layers' must list 4 flags"));
  bad = j;
  bad["moe_layers"] = {1, 7};
  CHECK_THAT(parse_error(bad), mt_test::contains("cfg.json: key 'moe_layers' entry 7 is not a layer index below 4"));
  bad = j;
  bad["num_experts_per_tok"] = 5;
  CHECK_THAT(parse_error(bad), mt_test::contains("key 'num_experts_per_tok' (5) must be between 1"));
  CHECK_THAT(parse_error({{"architectures", {"Llama4ForConditionalGeneration"}}}),
             mt_test::contains("cfg.json: Llama4ForConditionalGeneration needs 'text_config'"));
}

TEST_CASE("GPT-OSS: sinks, alternating windows, YaRN default, biased router and stacked experts, clamped SwiGLU",
          "[families][moe][gpt_oss]") {
  json j = {{"architectures", {"GptOssForCausalLM"}}, {"vocab_size", 128}, {"hidden_size", 64},
            {"intermediate_size", 32}, {"num_hidden_layers", 4}, {"num_attention_heads", 4},
            {"num_key_value_heads", 2}, {"head_dim", 16}, {"num_local_experts", 4}, {"num_experts_per_tok", 2},
            {"quantization_config", {{"quant_method", "mxfp4"}}}};
  const mt::ModelSpec s = parse(j);
  CHECK(s.layers[0].attention.window == 128);  // GptOssConfig: even layers slide, window 128
  CHECK(s.layers[1].attention.window == 0);
  CHECK(s.layers[0].attention.sinks);
  CHECK(s.layers[0].attention.qkv_bias);
  CHECK(s.layers[0].attention.o_bias);
  CHECK(s.rope_tables[0].type == "yarn");
  CHECK(s.rope_tables[0].factor == 32.0);
  CHECK(s.rope_tables[0].theta == 150000.0);
  CHECK_FALSE(s.rope_tables[0].truncate);
  const mt::MoeSpec& m = s.layers[2].moe;
  CHECK(m.router == mt::RouterKind::topk_softmax);
  CHECK(m.router_bias);
  CHECK(m.expert_bias);
  CHECK(m.swiglu_alpha == 1.702);
  CHECK(m.swiglu_limit == 7.0);
  const mt::ParamLayout layout = mt::make_param_layout(s);
  const auto& slots = layout.layer(2).params;
  const auto slot = [&](const std::string& name) -> const mt::ParamSlot& {
    for (const mt::ParamSlot& p : slots)
      if (p.hf_name == "model.layers.2." + name) return p;
    FAIL("no slot " << name);
    return slots.front();
  };
  CHECK(slot("self_attn.sinks").shape == std::vector<int64_t>{4});
  CHECK(slot("mlp.router.bias").shape == std::vector<int64_t>{4});
  CHECK(slot("mlp.experts.gate_up_proj").shape == std::vector<int64_t>{4, 64, 64});
  CHECK(slot("mlp.experts.gate_up_proj_bias").shape == std::vector<int64_t>{4, 64});
  CHECK_FALSE(slot("mlp.experts.gate_up_proj_bias").weight_decay);
  CHECK(slot("mlp.experts.down_proj").shape == std::vector<int64_t>{4, 32, 64});
  // Stacked [E, in, out] with gate/up interleaved → per expert gate rows then up rows, nn.Linear's [out, in].
  const mt::ParamSlot& gate_up = slot("mlp.experts.gate_up_proj");
  std::vector<float> hf(static_cast<size_t>(gate_up.numel)), store(hf.size()), back(hf.size());
  for (size_t i = 0; i < hf.size(); ++i) hf[i] = static_cast<float>(i);
  mt::hf_rows_to_store(gate_up, hf.data(), store.data());
  const mt::MoeOffsets& o = layout.layer(2).offsets.moe;
  const auto hf_at = [&](int64_t e, int64_t in, int64_t col) { return hf[static_cast<size_t>((e * 64 + in) * 64 + col)]; };
  const auto store_at = [&](int64_t offset) { return store[static_cast<size_t>(offset - gate_up.offset)]; };
  CHECK(store_at(o.gate_of(1) + 5 * 64 + 3) == hf_at(1, 3, 2 * 5));     // gate row 5, input 3
  CHECK(store_at(o.up_of(2) + 7 * 64 + 9) == hf_at(2, 9, 2 * 7 + 1));  // up row 7, input 9
  mt::store_rows_to_hf(gate_up, store.data(), back.data());
  CHECK(back == hf);
  j["quantization_config"]["quant_method"] = "bitsandbytes";
  CHECK_THAT(parse_error(j), mt_test::contains("cfg.json: key 'quantization_config.quant_method' must be mxfp4"));
}

TEST_CASE("published MoE shapes: total and active parameters as the model cards state", "[families][moe]") {
  struct Card {
    const char* file;
    double total, active;  // billions
  };
  for (const Card& c : {Card{"mixtral-8x7b", 46.70, 12.88}, Card{"mixtral-8x22b", 140.6, 39.2},
                        Card{"qwen3-30b-a3b", 30.53, 3.35}, Card{"qwen3-235b-a22b", 235.1, 22.1},
                        // GLM-4.5-Air's card: 106 B total, 12 B active without the 1.24 B of embedding and head.
                        Card{"glm-4.5-air", 106.85, 13.42},
                        // Llama 4's cards: Scout 109 B and Maverick 400 B total (with the vision tower), 17 B active.
                        Card{"llama-4-scout-17b-16e", 107.77, 17.17}, Card{"llama-4-maverick-17b-128e", 400.71, 17.19},
                        // GPT-OSS's card: 116.83 B / 20.91 B total; 5.13 B / 3.61 B active without the 0.58 B
                        // embedding table (our active count has it).
                        Card{"gpt-oss-120b", 116.83, 5.71}, Card{"gpt-oss-20b", 20.91, 4.19}}) {
    INFO(c.file);
    const mt::ModelSpec s = mt::load_model_spec(std::string(MEGATRAIN_SOURCE_DIR "/configs/models/") + c.file + ".json");
    CHECK(std::abs(static_cast<double>(mt::count_parameters(s)) / 1e9 - c.total) < 0.01 * c.total);
    CHECK(std::abs(static_cast<double>(mt::count_active_parameters(s)) / 1e9 - c.active) < 0.01 * c.active);
    // Model FLOPs count the active matmul parameters only.
    const mt::StepFlops f = mt::step_flops(s, mt::make_param_layout(s), 1, 1);
    CHECK(f.six_n == Approx(6.0 * static_cast<double>(mt::count_active_parameters(s))));
  }
}
