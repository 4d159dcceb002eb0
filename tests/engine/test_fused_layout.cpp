// Fused tensors through the whole engine: the same HF weights in separate q/k/v and gate/up tensors, in Phi-3's
// fused qkv_proj and gate_up_proj (rows one part after the other), and in InternLM2's wqkv (rows grouped by kv
// head, regrouped by the store), loaded through each layout, give bitwise the same loss and — mapped back to the
// HF tensors — the same gradients. This checks that the layouts' offsets address the right parts and that
// hf_rows_to_store / store_rows_to_hf undo each other around a training step.
#include <map>
#include <string>

#include "catch.h"
#include "engine/engine.h"
#include "engine/tiny_model.h"

using namespace mt;
using namespace mt::testing;

namespace {

using Tensors = std::map<std::string, std::vector<float>>;  // HF name -> values in the HF row order

// Rows [first, first + n) of a tensor of `cols` columns, appended to out.
void append_rows(std::vector<float>& out, const std::vector<float>& t, int64_t cols, int64_t first, int64_t n) {
  out.insert(out.end(), t.begin() + first * cols, t.begin() + (first + n) * cols);
}

// The HF tensors of `fused` (whose names fuse q|k|v and gate|up) from those of the separate layout of the same
// model: what a converted checkpoint holds.
Tensors fuse(const Tensors& separate, const ModelSpec& fused) {
  const TensorNames plain;  // the separate layout's names
  Tensors out;
  for (int64_t i = 0; i < fused.num_layers; ++i) {
    const AttentionSpec& a = fused.layers[static_cast<size_t>(i)].attention;
    const std::string prefix = fused.names.layer_prefix + std::to_string(i) + ".";
    for (const char* suffix : {".weight", ".bias"}) {
      const int64_t cols = std::string(suffix) == ".weight" ? fused.hidden_size : 1;
      if (const auto q = separate.find(prefix + plain.q + suffix); q != separate.end()) {
        const std::vector<float>& k = separate.at(prefix + plain.k + suffix);
        const std::vector<float>& v = separate.at(prefix + plain.v + suffix);
        // Grouped: per kv head its q heads, its k head, its v head. Otherwise all q, all k, all v (one group).
        const int64_t groups = fused.names.qkv_grouped ? a.num_kv_heads : 1;
        const int64_t q_rows = a.q_dim() / groups, kv_rows = a.kv_dim() / groups;
        std::vector<float>& qkv = out[prefix + fused.names.qkv + suffix];
        for (int64_t g = 0; g < groups; ++g) {
          append_rows(qkv, q->second, cols, g * q_rows, q_rows);
          append_rows(qkv, k, cols, g * kv_rows, kv_rows);
          append_rows(qkv, v, cols, g * kv_rows, kv_rows);
        }
      }
      if (const auto gate = separate.find(prefix + plain.gate + suffix); gate != separate.end()) {
        std::vector<float>& gate_up = out[prefix + fused.names.gate_up + suffix];
        gate_up = gate->second;
        const std::vector<float>& up = separate.at(prefix + plain.up + suffix);
        gate_up.insert(gate_up.end(), up.begin(), up.end());
      }
    }
  }
  for (const auto& [name, values] : separate) {
    const bool part = name.find(plain.q + ".") != std::string::npos || name.find(plain.k + ".") != std::string::npos ||
                      name.find(plain.v + ".") != std::string::npos || name.find(plain.gate + ".") != std::string::npos ||
                      name.find(plain.up + ".") != std::string::npos;
    if (!part) out[name] = values;
  }
  return out;
}

// A store's masters (or gradients) as HF tensors.
Tensors hf_tensors(HostStore& store, bool grads) {
  Tensors out;
  for (int64_t r = 0; r < store.num_regions(); ++r)
    for (const ParamSlot& slot : store.layout().regions[static_cast<size_t>(r)].params) {
      std::vector<float>& t = out[slot.hf_name];
      t.resize(static_cast<size_t>(slot.numel));
      store_rows_to_hf(slot, (grads ? store.grad(r) : store.master(r)) + slot.offset, t.data());
    }
  return out;
}

void load(HostStore& store, const Tensors& hf) {
  for (int64_t r = 0; r < store.num_regions(); ++r) {
    for (const ParamSlot& slot : store.layout().regions[static_cast<size_t>(r)].params) {
      INFO(slot.hf_name);
      REQUIRE(hf.count(slot.hf_name) == 1);
      REQUIRE(static_cast<int64_t>(hf.at(slot.hf_name).size()) == slot.numel);
      hf_rows_to_store(slot, hf.at(slot.hf_name).data(), store.master(r) + slot.offset);
    }
    store.refresh_stream_copy(r);
  }
}

double step(const ModelSpec& spec, HostStore& store) {
  auto be = make_cpu_backend();
  EngineOptions o;
  o.max_positions = 32;
  o.micro_batch_size = 2;
  Engine engine(*be, spec, store, o);
  return engine.forward_backward(tiny_batch(spec.vocab_size, 4)).loss_sum;
}

}  // namespace

TEST_CASE("fused and kv-grouped q|k|v and gate|up tensors train bitwise like separate ones", "[engine][layout]") {
  // q/k norm, q/k/v/o biases, GQA (4 heads over 2 kv heads), a sliding window, yarn RoPE.
  const ModelSpec separate = tiny_spec(3, false);
  const ParamLayout separate_layout = make_param_layout(separate);
  HostStore reference(separate_layout, DType::f32);
  fill_random(reference, 17);
  const Tensors weights = hf_tensors(reference, false);
  const double reference_loss = step(separate, reference);
  const Tensors reference_grads = hf_tensors(reference, true);

  for (const bool grouped : {false, true}) {
    INFO((grouped ? "InternLM2-style wqkv grouped by kv head" : "Phi-3-style qkv_proj and gate_up_proj"));
    ModelSpec spec = separate;
    spec.names.qkv = grouped ? "attention.wqkv" : "self_attn.qkv_proj";
    spec.names.qkv_grouped = grouped;
    spec.names.gate_up = "mlp.gate_up_proj";
    const ParamLayout layout = make_param_layout(spec);
    CHECK(layout.total_numel == separate_layout.total_numel);
    // q, k, v and their biases become one weight and one bias; gate and up one weight.
    CHECK(layout.layer(0).params.size() == separate_layout.layer(0).params.size() - 5);
    CHECK(layout.layer(0).params[1].rows.parts.size() == (grouped ? 3u : 0u));
    HostStore store(layout, DType::f32);
    load(store, fuse(weights, spec));
    if (grouped) {  // the store holds q | k | v: the separate layout's values at the fused layout's offsets
      const AttentionOffsets& a = layout.layer(1).offsets.attention;
      const AttentionOffsets& s = separate_layout.layer(1).offsets.attention;
      const int64_t H = spec.hidden_size, kv = spec.layers[1].attention.kv_dim();
      for (int64_t e = 0; e < kv * H; ++e) {
        REQUIRE(store.master(2)[a.k + e] == reference.master(2)[s.k + e]);
        REQUIRE(store.master(2)[a.v + e] == reference.master(2)[s.v + e]);
      }
      for (int64_t e = 0; e < kv; ++e) REQUIRE(store.master(2)[a.v_bias + e] == reference.master(2)[s.v_bias + e]);
    }

    CHECK(step(spec, store) == reference_loss);
    const Tensors grads = hf_tensors(store, true);
    const Tensors expected = fuse(reference_grads, spec);
    REQUIRE(grads.size() == expected.size());
    for (const auto& [name, values] : expected) {
      INFO(name);
      REQUIRE(grads.count(name) == 1);
      CHECK(grads.at(name) == values);
    }
  }
}
