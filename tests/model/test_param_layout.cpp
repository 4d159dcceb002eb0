// ParamLayout: slot order, offsets and counts for tiny Qwen2 (q/k/v biases, tied), Qwen3 (qk norm) and Llama
// (every bias) models, fused q|k|v and gate|up tensors (Phi-3 style, and InternLM2's wqkv grouped by kv head with
// its row regrouping), layers of different specs and sandwich norms, and agreement with the tensors transformers
// saved for the golden fixtures; the runs of slots that decay alike, which AdamW walks; each expert's up weight (and
// bias) right after its gate's in every expert layout, as the MoE block's one gate_up GEMM reads them.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <tuple>

#include "catch.h"
#include "io/safetensors.h"
#include "model/families.h"
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
  for (int64_t i = 0; i < 2; ++i) {
    INFO("layer " << i);
    const mt::LayerOffsets& d = l.layer(i).offsets;
    CHECK(d.input_norm == 0);
    CHECK(d.attention.q == 8);
    CHECK(d.attention.q_bias == 72);
    CHECK(d.attention.k == 80);
    CHECK(d.attention.k_bias == 112);
    CHECK(d.attention.v == 116);
    CHECK(d.attention.v_bias == 148);
    CHECK(d.attention.o == 152);
    CHECK(d.attention.o_bias == -1);
    CHECK(d.attention.q_norm == -1);
    CHECK(d.attention.k_norm == -1);
    CHECK(d.attn_out_norm == -1);
    CHECK(d.mlp_norm == 216);
    CHECK(d.mlp.gate == 224);
    CHECK(d.mlp.gate_bias == -1);
    CHECK(d.mlp.up == 320);
    CHECK(d.mlp.up_bias == -1);
    CHECK(d.mlp.down == 416);
    CHECK(d.mlp.down_bias == -1);
    CHECK(d.mlp_out_norm == -1);
  }

  const mt::Region& head = l.head_region();
  CHECK(head.kind == mt::RegionKind::head);
  REQUIRE(head.params.size() == 1);
  CHECK(head.params[0].hf_name == "model.norm.weight");
  CHECK(l.head.norm == 0);
  CHECK(l.head.lm_head == -1);
  CHECK(l.total_numel == 128 + 2 * 512 + 8);
  CHECK(l.largest_region_numel == 512);
  CHECK(l.largest_layer_numel == 512);
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
  for (int64_t i = 0; i < 2; ++i) {
    INFO("layer " << i);
    const mt::AttentionOffsets& a = l.layer(i).offsets.attention;
    CHECK(a.q_norm == 200);
    CHECK(a.k_norm == 204);
    CHECK(a.q_bias == -1);
    CHECK(l.layer(i).offsets.mlp_norm == 208);
  }
  const mt::Region& head = l.head_region();
  REQUIRE(head.params.size() == 2);
  CHECK(head.params[1].hf_name == "lm_head.weight");
  CHECK(head.params[1].shape == std::vector<int64_t>{16, 8});
  CHECK(l.head.lm_head == 8);
  CHECK(head.numel == 136);
  CHECK(l.total_numel == 128 + 2 * 504 + 136);
}

TEST_CASE("decay runs: adjacent slots that decay alike merge, each run covers its slots exactly", "[param_layout]") {
  using Run = std::tuple<int64_t, int64_t, bool>;
  auto runs_of = [](const mt::Region& r) {
    std::vector<Run> out;
    for (const mt::DecayRun& run : mt::decay_runs(r)) out.emplace_back(run.begin, run.end, run.weight_decay);
    return out;
  };
  const mt::ParamLayout dense = mt::make_param_layout(tiny("Qwen3ForCausalLM", nlohmann::json::object()));
  // norm | q k v o | q_norm k_norm post-attention norm | gate up down (the offsets of the qwen3 case above)
  CHECK(runs_of(dense.layer(1)) == std::vector<Run>{{0, 8, false}, {8, 200, true}, {200, 216, false}, {216, 504, true}});
  CHECK(runs_of(dense.head_region()) == std::vector<Run>{{0, 8, false}, {8, 136, true}});

  // 8 experts, a tensor each for gate, up and down: the router and every expert matrix are one run.
  const mt::ParamLayout moe = mt::make_param_layout(
      tiny("Qwen3MoeForCausalLM", {{"num_experts", 8}, {"num_experts_per_tok", 2}, {"moe_intermediate_size", 4}}));
  const mt::Region& layer = moe.layer(0);
  REQUIRE(layer.params.size() > 24);
  const std::vector<mt::DecayRun> runs = mt::decay_runs(layer);
  CHECK(runs.size() == 4);  // norm | attention | q/k norms and the MLP norm | router and experts
  int64_t covered = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    CHECK(runs[i].begin == (i == 0 ? 0 : runs[i - 1].end));
    CHECK((i == 0 || runs[i].weight_decay != runs[i - 1].weight_decay));
    covered += runs[i].end - runs[i].begin;
  }
  CHECK(covered == layer.numel);
  for (const mt::ParamSlot& slot : layer.params) {
    INFO(slot.hf_name);
    const auto run = std::find_if(runs.begin(), runs.end(), [&](const mt::DecayRun& r) { return slot.offset < r.end; });
    REQUIRE(run != runs.end());
    CHECK(slot.offset + slot.numel <= run->end);
    CHECK(run->weight_decay == slot.weight_decay);
  }
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
  for (int64_t i = 0; i < 2; ++i) {
    INFO("layer " << i);
    const mt::LayerOffsets& d = l.layer(i).offsets;
    CHECK(d.attention.o_bias == 216);
    CHECK(d.mlp.gate_bias == 328);
    CHECK(d.mlp.up_bias == 436);
    CHECK(d.mlp.down_bias == 544);
  }
  CHECK(l.largest_region_numel == 552);
  CHECK(l.largest_layer_numel == 552);
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

namespace {

// A model built by hand, as a family parser would leave it: `layers` identical layers of 4 query heads over
// `kv_heads` kv heads of head_dim 2 on hidden size 8, MLP 12.
mt::ModelSpec hand_spec(int64_t kv_heads, int64_t layers = 2) {
  mt::ModelSpec s;
  s.architecture = "HandForCausalLM";
  s.family = "hand";
  s.vocab_size = 16;
  s.hidden_size = 8;
  s.num_layers = layers;
  s.max_position_embeddings = 32;
  mt::RopeSpec rope;
  rope.head_dim = 2;
  s.rope_tables = {rope};
  mt::LayerSpec l;
  l.attention.num_heads = 4;
  l.attention.num_kv_heads = kv_heads;
  l.attention.head_dim = 2;
  l.attention.scale = 1.0 / std::sqrt(2.0);
  l.mlp.intermediate_size = 12;
  s.layers.assign(static_cast<size_t>(layers), l);
  mt::validate_model_spec(s, "hand spec");
  return s;
}

// InternLM2's names: wqkv holds, per kv head, its query heads, then its key, then its value.
mt::ModelSpec internlm2_like(int64_t kv_heads, bool bias) {
  mt::ModelSpec s = hand_spec(kv_heads);
  s.names.embedding = "model.tok_embeddings.weight";
  s.names.lm_head = "output.weight";
  s.names.input_norm = "attention_norm";
  s.names.mlp_norm = "ffn_norm";
  s.names.qkv = "attention.wqkv";
  s.names.qkv_grouped = true;
  s.names.o = "attention.wo";
  s.names.gate = "feed_forward.w1";
  s.names.up = "feed_forward.w3";
  s.names.down = "feed_forward.w2";
  for (mt::LayerSpec& l : s.layers) l.attention.qkv_bias = bias;
  return s;
}

}  // namespace

TEST_CASE("fused q|k|v and gate|up tensors: one slot each, the offsets address their parts", "[param_layout]") {
  mt::ModelSpec spec = tiny("LlamaForCausalLM", {{"attention_bias", true}, {"mlp_bias", true}});
  spec.names.qkv = "self_attn.qkv_proj";  // Phi-3: q, k, v rows one after the other
  spec.names.gate_up = "mlp.gate_up_proj";
  const mt::ParamLayout l = mt::make_param_layout(spec);
  for (int64_t i = 0; i < 2; ++i) {
    check_layer(l.layer(i), i,
                {{"input_layernorm.weight", {8}, 0},
                 {"self_attn.qkv_proj.weight", {16, 8}, 8},
                 {"self_attn.qkv_proj.bias", {16}, 136},
                 {"self_attn.o_proj.weight", {8, 8}, 152},
                 {"self_attn.o_proj.bias", {8}, 216},
                 {"post_attention_layernorm.weight", {8}, 224},
                 {"mlp.gate_up_proj.weight", {24, 8}, 232},
                 {"mlp.gate_up_proj.bias", {24}, 424},
                 {"mlp.down_proj.weight", {8, 12}, 448},
                 {"mlp.down_proj.bias", {8}, 544}});
    for (const mt::ParamSlot& p : l.layer(i).params) CHECK(p.rows.parts.empty());  // kept in HF order
    INFO("layer " << i);
    const mt::LayerOffsets& d = l.layer(i).offsets;
    // q is rows 0..7 of qkv_proj, k rows 8..11, v rows 12..15; their biases likewise.
    CHECK(d.attention.q == 8);
    CHECK(d.attention.k == 8 + 8 * 8);
    CHECK(d.attention.v == 8 + 12 * 8);
    CHECK(d.attention.q_bias == 136);
    CHECK(d.attention.k_bias == 136 + 8);
    CHECK(d.attention.v_bias == 136 + 12);
    CHECK(d.attention.o == 152);
    CHECK(d.attention.o_bias == 216);
    CHECK(d.mlp_norm == 224);
    // gate is rows 0..11 of gate_up_proj, up rows 12..23.
    CHECK(d.mlp.gate == 232);
    CHECK(d.mlp.up == 232 + 12 * 8);
    CHECK(d.mlp.gate_bias == 424);
    CHECK(d.mlp.up_bias == 424 + 12);
    CHECK(d.mlp.down == 448);
    CHECK(d.mlp.down_bias == 544);
  }
  // The same parameters as the separate tensors hold.
  CHECK(l.total_numel == mt::make_param_layout(tiny("LlamaForCausalLM", {{"attention_bias", true}, {"mlp_bias", true}}))
                             .total_numel);
}

TEST_CASE("a q|k|v tensor grouped by kv head is one slot whose rows the store regroups", "[param_layout]") {
  const mt::ParamLayout l = mt::make_param_layout(internlm2_like(2, true));
  CHECK(l.embedding().params[0].hf_name == "model.tok_embeddings.weight");
  CHECK(l.head_region().params[1].hf_name == "output.weight");
  const std::vector<Expected> layer = {
      {"attention_norm.weight", {8}, 0},       {"attention.wqkv.weight", {16, 8}, 8},
      {"attention.wqkv.bias", {16}, 136},      {"attention.wo.weight", {8, 8}, 152},
      {"ffn_norm.weight", {8}, 216},           {"feed_forward.w1.weight", {12, 8}, 224},
      {"feed_forward.w3.weight", {12, 8}, 320}, {"feed_forward.w2.weight", {8, 12}, 416},
  };
  for (int64_t i = 0; i < 2; ++i) {
    check_layer(l.layer(i), i, layer);
    INFO("layer " << i);
    // 2 groups, each 2 query heads (4 rows), a key head (2 rows) and a value head (2 rows).
    for (const size_t slot : {size_t{1}, size_t{2}}) {
      const mt::RowGrouping& g = l.layer(i).params[slot].rows;
      CHECK(g.groups == 2);
      CHECK(g.parts == std::vector<int64_t>{4, 2, 2});
    }
    for (const size_t slot : {size_t{0}, size_t{3}, size_t{4}, size_t{5}}) CHECK(l.layer(i).params[slot].rows.parts.empty());
    // In the store, all q rows come first, then all k rows, then all v rows.
    const mt::AttentionOffsets& a = l.layer(i).offsets.attention;
    CHECK(a.q == 8);
    CHECK(a.k == 8 + 8 * 8);
    CHECK(a.v == 8 + 12 * 8);
    CHECK(a.q_bias == 136);
    CHECK(a.k_bias == 144);
    CHECK(a.v_bias == 148);
    CHECK(a.o == 152);
    CHECK(l.layer(i).offsets.mlp_norm == 216);
    CHECK(l.layer(i).offsets.mlp.gate == 224);
    CHECK(l.layer(i).offsets.mlp.up == 320);
    CHECK(l.layer(i).offsets.mlp.down == 416);
  }

  SECTION("the weight's rows round-trip between the HF and the store order") {
    const mt::ParamSlot& w = l.layer(0).params[1];
    std::vector<float> hf(static_cast<size_t>(w.numel)), store(hf.size(), -1.0f), back(hf.size(), -1.0f);
    for (size_t e = 0; e < hf.size(); ++e) hf[e] = static_cast<float>(e);  // row r holds 8r .. 8r + 7
    mt::hf_rows_to_store(w, hf.data(), store.data());
    // HF rows: group 0 = q heads 0, 1 (rows 0-3), k head 0 (4-5), v head 0 (6-7); group 1 = rows 8-15 likewise.
    const std::vector<int64_t> hf_row_of_store_row = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15};
    for (int64_t r = 0; r < 16; ++r)
      for (int64_t c = 0; c < 8; ++c) {
        INFO("store row " << r << " column " << c);
        CHECK(store[static_cast<size_t>(r * 8 + c)] == static_cast<float>(hf_row_of_store_row[r] * 8 + c));
      }
    mt::store_rows_to_hf(w, store.data(), back.data());
    CHECK(back == hf);
  }
  SECTION("the bias's rows round-trip too") {
    const mt::ParamSlot& b = l.layer(1).params[2];
    std::vector<float> hf(16), store(16, -1.0f), back(16, -1.0f);
    for (size_t e = 0; e < hf.size(); ++e) hf[e] = static_cast<float>(e);
    mt::hf_rows_to_store(b, hf.data(), store.data());
    CHECK(store == std::vector<float>{0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15});
    mt::store_rows_to_hf(b, store.data(), back.data());
    CHECK(back == hf);
  }
  SECTION("slots without a grouping copy as they are") {
    const mt::ParamSlot& o = l.layer(0).params[3];
    std::vector<float> hf(static_cast<size_t>(o.numel)), store(hf.size()), back(hf.size());
    for (size_t e = 0; e < hf.size(); ++e) hf[e] = static_cast<float>(e) * 0.5f;
    mt::hf_rows_to_store(o, hf.data(), store.data());
    CHECK(store == hf);
    mt::store_rows_to_hf(o, store.data(), back.data());
    CHECK(back == hf);
  }
}

TEST_CASE("with one kv head the grouped order is the plain one: no regrouping", "[param_layout]") {
  const mt::ParamLayout l = mt::make_param_layout(internlm2_like(1, false));
  const mt::ParamSlot& w = l.layer(0).params[1];
  CHECK(w.hf_name == "model.layers.0.attention.wqkv.weight");
  CHECK(w.shape == std::vector<int64_t>{12, 8});  // 4 q heads, 1 k, 1 v of 2 rows
  CHECK(w.rows.parts.empty());
  const mt::AttentionOffsets& a = l.layer(0).offsets.attention;
  CHECK(a.q == 8);
  CHECK(a.k == 8 + 8 * 8);
  CHECK(a.v == 8 + 10 * 8);
  CHECK(a.q_bias == -1);
}

TEST_CASE("layers of different specs get their own slots and offsets", "[param_layout]") {
  mt::ModelSpec spec = hand_spec(2, 3);
  spec.names.attn_out_norm = "post_attention_layernorm";  // Gemma 2's sandwich norms
  spec.names.mlp_norm = "pre_feedforward_layernorm";
  spec.names.mlp_out_norm = "post_feedforward_layernorm";
  spec.layers[1].post_norms = true;
  spec.layers[1].attention.qk_norm = true;
  spec.layers[2].mlp.intermediate_size = 20;
  mt::validate_model_spec(spec, "hand spec");
  const mt::ParamLayout l = mt::make_param_layout(spec);
  REQUIRE(l.regions.size() == 5);

  // Layer 0: norm 8, q 64, k 32, v 32, o 64, norm 8, MLP 3 × 96.
  check_layer(l.layer(0), 0,
              {{"input_layernorm.weight", {8}, 0},
               {"self_attn.q_proj.weight", {8, 8}, 8},
               {"self_attn.k_proj.weight", {4, 8}, 72},
               {"self_attn.v_proj.weight", {4, 8}, 104},
               {"self_attn.o_proj.weight", {8, 8}, 136},
               {"pre_feedforward_layernorm.weight", {8}, 200},
               {"mlp.gate_proj.weight", {12, 8}, 208},
               {"mlp.up_proj.weight", {12, 8}, 304},
               {"mlp.down_proj.weight", {8, 12}, 400}});
  CHECK(l.layer(0).numel == 496);
  CHECK(l.layer(0).offsets.attn_out_norm == -1);
  CHECK(l.layer(0).offsets.mlp_out_norm == -1);

  // Layer 1: q/k norms after o_proj, a norm on the attention output and one on the MLP output.
  check_layer(l.layer(1), 1,
              {{"input_layernorm.weight", {8}, 0},
               {"self_attn.q_proj.weight", {8, 8}, 8},
               {"self_attn.k_proj.weight", {4, 8}, 72},
               {"self_attn.v_proj.weight", {4, 8}, 104},
               {"self_attn.o_proj.weight", {8, 8}, 136},
               {"self_attn.q_norm.weight", {2}, 200},
               {"self_attn.k_norm.weight", {2}, 202},
               {"post_attention_layernorm.weight", {8}, 204},
               {"pre_feedforward_layernorm.weight", {8}, 212},
               {"mlp.gate_proj.weight", {12, 8}, 220},
               {"mlp.up_proj.weight", {12, 8}, 316},
               {"mlp.down_proj.weight", {8, 12}, 412},
               {"post_feedforward_layernorm.weight", {8}, 508}});
  const mt::LayerOffsets& o1 = l.layer(1).offsets;
  CHECK(o1.attention.q_norm == 200);
  CHECK(o1.attention.k_norm == 202);
  CHECK(o1.attn_out_norm == 204);
  CHECK(o1.mlp_norm == 212);
  CHECK(o1.mlp.gate == 220);
  CHECK(o1.mlp.down == 412);
  CHECK(o1.mlp_out_norm == 508);
  CHECK(l.layer(1).numel == 516);

  // Layer 2: a wider MLP.
  const mt::LayerOffsets& o2 = l.layer(2).offsets;
  CHECK(o2.mlp.gate == 208);
  CHECK(o2.mlp.up == 208 + 160);
  CHECK(o2.mlp.down == 208 + 320);
  CHECK(l.layer(2).numel == 208 + 3 * 160);

  CHECK(l.largest_layer_numel == 688);
  CHECK(l.largest_region_numel == 688);
  CHECK(l.total_numel == 128 + 496 + 516 + 688 + 8 + 128);
  CHECK(mt::count_parameters(spec) == l.total_numel);
}

TEST_CASE("every expert layout puts each expert's up weight (and bias) right after its gate's", "[param_layout]") {
  // The MoE block runs [W_gate; W_up] as one [2I, H] matrix per expert (engine/moe_block.h): the golden MoE fixtures
  // as their weights name them, and the shipped MoE shapes, each also forced through every fused 3-D layout.
  const fs::path root = fs::path(MEGATRAIN_SOURCE_DIR);
  std::vector<std::pair<std::string, mt::ModelSpec>> specs;
  for (const auto& entry : fs::directory_iterator(root / "tests" / "fixtures")) {
    const fs::path dir = entry.path() / "model";
    if (!fs::exists(dir / "config.json")) continue;
    mt::ModelSpec spec = mt::load_model_spec(dir / "config.json", true);
    const mt::SafetensorsModel weights(dir);
    mt::match_tensor_names(spec, [&](const std::string& name) { return weights.find(name) != nullptr; });
    specs.emplace_back(entry.path().filename().string(), spec);
  }
  for (const auto& entry : fs::directory_iterator(root / "configs" / "models"))
    if (entry.path().extension() == ".json")
      specs.emplace_back(entry.path().filename().string(), mt::load_model_spec(entry.path(), true));
  int moe_specs = 0;
  for (const auto& [name, parsed] : specs) {
    if (std::none_of(parsed.layers.begin(), parsed.layers.end(), [](const mt::LayerSpec& l) { return l.moe.active(); }))
      continue;
    ++moe_specs;
    std::vector<mt::ModelSpec> variants = {parsed};
    for (const auto layout : {mt::FusedExpertLayout::rows, mt::FusedExpertLayout::columns,
                              mt::FusedExpertLayout::interleaved_columns}) {
      mt::ModelSpec v = mt::first_layers(parsed, std::min<int64_t>(parsed.num_layers, 4));
      v.names.fused_experts = true;
      v.names.fused_layout = layout;
      variants.push_back(v);
    }
    for (const mt::ModelSpec& spec : variants) {
      INFO(name << (spec.names.fused_experts ? " fused layout " : " per-expert tensors ")
                << static_cast<int>(spec.names.fused_layout));
      const mt::ParamLayout layout = mt::make_param_layout(spec);
      for (int64_t i = 0; i < spec.num_layers; ++i) {
        const mt::MoeSpec& m = spec.layers[static_cast<size_t>(i)].moe;
        if (!m.active()) continue;
        const mt::MoeOffsets& o = layout.layer(i).offsets.moe;
        const int64_t I = m.intermediate_size, H = spec.hidden_size, S = m.shared_intermediate_size;
        CHECK(o.up_of(0) == o.gate_of(0) + I * H);
        CHECK(o.up_of(m.num_experts - 1) == o.gate_of(m.num_experts - 1) + I * H);
        CHECK(o.expert_stride >= 2 * I * H);
        if (m.expert_bias) {
          CHECK(o.up_bias == o.gate_bias + I);
          CHECK(o.bias_stride == 2 * I);
        }
        if (S > 0) CHECK(o.shared.up == o.shared.gate + S * H);
      }
    }
  }
  CHECK(moe_specs >= 20);
}
