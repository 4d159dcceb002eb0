// The latent-attention family parsers (DeepSeek-V2/V3, Kimi K2, GLM-4.7-Flash): the published shapes read into MLA
// layers (dims, the attention call's q/k head dim and YaRN-scaled softmax scale, rope pairs), the DeepSeek MoE
// (dense then sparse layers, routers, shared experts), parameter counts against the model cards (671 B, 1.03 T,
// 30 B, 15.7 B), the store's regrouped q_b_proj / kv_b_proj rows round-tripping to HF order, and one-line errors
// naming the config, the key and the value.
#include <cmath>
#include <numeric>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "core/error.h"
#include "model/model_spec.h"
#include "model/param_layout.h"

namespace {

mt::ModelSpec shape(const char* name) {
  return mt::load_model_spec(std::string(MEGATRAIN_SOURCE_DIR "/configs/models/") + name + ".json");
}

nlohmann::json tiny_v3() {
  return {{"architectures", {"DeepseekV3ForCausalLM"}}, {"vocab_size", 128}, {"hidden_size", 32},
          {"intermediate_size", 48}, {"num_hidden_layers", 3}, {"num_attention_heads", 4},
          {"num_key_value_heads", 4}, {"kv_lora_rank", 16}, {"q_lora_rank", 12}, {"qk_nope_head_dim", 8},
          {"qk_rope_head_dim", 8}, {"v_head_dim", 12}, {"n_routed_experts", 8}, {"num_experts_per_tok", 2},
          {"moe_intermediate_size", 12}, {"n_group", 4}, {"topk_group", 2}, {"first_k_dense_replace", 1},
          {"max_position_embeddings", 64}};
}
std::string parse_error(const nlohmann::json& j) {
  try {
    mt::parse_model_spec(j, "cfg.json");
  } catch (const mt::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("DeepSeek-V3: MLA layers with YaRN's mscale² in the softmax scale, 3 dense then 58 noaux_tc MoE layers, "
          "671 B parameters", "[families][mla]") {
  const mt::ModelSpec s = shape("deepseek-v3");
  REQUIRE(s.layers.size() == 61);
  const mt::LayerSpec& l = s.layers.front();
  CHECK(l.is_mla());
  CHECK(l.mla.q_lora_rank == 1536);
  CHECK(l.mla.kv_lora_rank == 512);
  CHECK(l.mla.qk_head_dim() == 192);
  CHECK(l.mla.v_head_dim == 128);
  CHECK(l.attention.head_dim == 192);
  CHECK(l.attention.num_heads == 128);
  const double mscale = 0.1 * std::log(40.0) + 1.0;  // mscale_all_dim 1, factor 40
  CHECK(l.attention.scale == Approx(mscale * mscale / std::sqrt(192.0)).epsilon(1e-12));
  CHECK(s.rope_tables.front().head_dim == 64);
  CHECK(s.rope_tables.front().interleaved);
  CHECK(s.rope_tables.front().type == "yarn");
  CHECK(s.rope_tables.front().attention_factor == Approx(1.0));  // mscale / mscale_all_dim
  for (size_t i = 0; i < s.layers.size(); ++i) CHECK(s.layers[i].moe.active() == (i >= 3));
  const mt::MoeSpec& moe = s.layers.back().moe;
  CHECK(moe.router == mt::RouterKind::sigmoid_group);
  CHECK(moe.num_experts == 256);
  CHECK(moe.top_k == 8);
  CHECK(moe.groups == 8);
  CHECK(moe.topk_groups == 4);
  CHECK(moe.routed_scaling == 2.5);
  CHECK(moe.norm_topk);
  CHECK(moe.shared_intermediate_size == 2048);
  CHECK(s.carries_other_tensors);  // the MTP layer
  CHECK(s.fp8_block_weights);       // the hub's quantization_config fp8: dequantised on load, no scales counted
  // 671.03 B, as the model card's 671 B (the MTP module's 14 B aside); + 58 × 256 score-correction biases.
  CHECK(mt::count_parameters(s) == 671026404352 + 58 * 256);
  CHECK(mt::describe_layers(s).find("latent attention 128 heads × 192/128 (kv rank 512, q rank 1536)") !=
        std::string::npos);
}

TEST_CASE("Kimi K2, GLM-4.7-Flash and DeepSeek-V2-Lite shapes: their routers and parameter counts", "[families][mla]") {
  const mt::ModelSpec kimi = shape("kimi-k2-instruct");
  CHECK(kimi.layers.back().moe.num_experts == 384);
  CHECK(kimi.layers.back().moe.routed_scaling == 2.827);
  CHECK(kimi.fp8_block_weights);
  CHECK(mt::count_parameters(kimi) == 1026408209408 + 60 * 384);
  const mt::ModelSpec glm = shape("glm-4.7-flash");
  CHECK(glm.layers.front().mla.v_head_dim == 256);
  CHECK(glm.layers.front().attention.head_dim == 256);
  CHECK_FALSE(glm.layers.front().moe.active());
  CHECK(glm.layers[1].moe.active());
  CHECK(glm.layers[1].moe.routed_scaling == 1.8);
  CHECK(mt::count_parameters(glm) == 29943390976 + 46 * 64);
  const mt::ModelSpec lite = shape("deepseek-v2-lite");
  CHECK(lite.layers.front().mla.q_lora_rank == 0);  // q_proj
  CHECK(lite.layers[1].moe.router == mt::RouterKind::softmax_topk);
  CHECK_FALSE(lite.layers[1].moe.norm_topk);
  CHECK(lite.layers[1].moe.shared_intermediate_size == 2 * 1408);
  CHECK(mt::count_parameters(lite) == 15706484224);
  const double mscale = 0.1 * 0.707 * std::log(40.0) + 1.0;
  CHECK(lite.layers.front().attention.scale == Approx(mscale * mscale / std::sqrt(192.0)).epsilon(1e-12));
}

TEST_CASE("MLA layout: q_b_proj and kv_b_proj rows regrouped per part over the heads, back to HF order on export",
          "[families][mla][param_layout]") {
  const mt::ModelSpec s = mt::parse_model_spec(tiny_v3(), "cfg.json");
  const mt::ParamLayout layout = mt::make_param_layout(s);
  const mt::Region& r = layout.layer(1);
  const mt::MlaOffsets& o = r.offsets.mla;
  CHECK(o.q_rope - o.q_nope == 4 * 8 * 12);       // every head's no-rope rows, then the rope rows
  CHECK(o.v - o.k_nope == 4 * 8 * 16);            // every head's key rows, then the value rows
  CHECK(o.kv_rope - o.kv_latent == 16 * 32);      // kv_a_proj_with_mqa: the latent rows, then the rotary key's
  for (const mt::ParamSlot& slot : r.params) {
    if (slot.hf_name.find("kv_b_proj") == std::string::npos) continue;
    std::vector<float> hf(static_cast<size_t>(slot.numel)), store(hf.size()), back(hf.size());
    std::iota(hf.begin(), hf.end(), 0.f);
    mt::hf_rows_to_store(slot, hf.data(), store.data());
    // HF row 8 is head 0's first value row; the store puts it after all 32 key rows.
    CHECK(store[static_cast<size_t>(32 * 16)] == hf[static_cast<size_t>(8 * 16)]);
    mt::store_rows_to_hf(slot, store.data(), back.data());
    CHECK(back == hf);
  }
}

TEST_CASE("MLA configs that cannot work are refused in one line naming the key and the value", "[families][mla]") {
  auto j = tiny_v3();
  j["qk_rope_head_dim"] = 7;
  CHECK_THAT(parse_error(j), mt_test::contains("key 'qk_rope_head_dim' must be even, got 7"));
  j = tiny_v3();
  j.erase("kv_lora_rank");
  CHECK_THAT(parse_error(j), mt_test::contains("required key 'kv_lora_rank' is missing"));
  j = tiny_v3();
  j["topk_method"] = "group_limited_greedy";
  CHECK_THAT(parse_error(j), mt_test::contains("key 'topk_method' is 'group_limited_greedy'"));
  j = tiny_v3();
  j["num_key_value_heads"] = 2;
  CHECK_THAT(parse_error(j), mt_test::contains("key 'num_key_value_heads' (2) must equal"));
  j = tiny_v3();
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 16},
                       {"partial_rotary_factor", 0.5}};
  CHECK_THAT(parse_error(j), mt_test::contains("key 'partial_rotary_factor' (0.5) must be 1"));
  j = tiny_v3();
  j["architectures"] = {"DeepseekV2ForCausalLM"};
  j["topk_method"] = "noaux_tc";
  CHECK_THAT(parse_error(j), mt_test::contains(
                                 "key 'topk_method' is 'noaux_tc'; DeepseekV2ForCausalLM routes with greedy or "
                                 "group_limited_greedy"));
  j = tiny_v3();
  j["architectures"] = {"Glm4MoeLiteForCausalLM"};
  j["mlp_layer_types"] = {"dense", "sparse"};
  CHECK_THAT(parse_error(j), mt_test::contains("key 'mlp_layer_types' must list 3 layer types"));
}
