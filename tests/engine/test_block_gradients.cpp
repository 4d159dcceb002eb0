// Every block's backward against finite differences, on the CPU backend, with no PyTorch: every decoder layer of
// every family's golden fixture model (tests/fixtures/<case>/model/config.json: attention with GQA, biases, q/k
// norms, sliding windows, soft-caps, sinks, ALiBi, output gates and partial / interleaved RoPE; GLU MLPs; MoE with shared
// experts and clamped SwiGLU; Gated DeltaNet; RMS norms with w and (1 + w), sandwich norms), then the final norm +
// LM head + cross-entropy. The functional is a random projection Σ r·y of the layer's output (the head: its loss).
// The CPU ops are fp32 only, so the derivative is a Richardson-extrapolated central difference in fp32
// ((4·D(h/2) − D(h)) / 3, error O(h⁴) plus fp32 rounding / h), compared tensor by tensor on up to 6 elements
// (every element of smaller tensors): ‖analytic − numeric‖ / ‖numeric‖ within 2e-3, where a gradient 1 % off
// (relative L2) is 1e-2 away; the test checks that too. MoE layers route to every expert and GPT-OSS's clamp is
// out of reach here (smooth()): finite differences across a choice or a corner measure a jump.
#include <cmath>
#include <filesystem>
#include <functional>
#include <random>

#include <omp.h>

#include "backend/grad_check.h"
#include "catch.h"
#include "engine/edge_layers.h"
#include "engine/layer_harness.h"
#include "model/alibi.h"
#include "model/rope.h"

using namespace mt;
using namespace mt::testing;

namespace {

constexpr double kTolerance = 2e-3;  // relative L2 per tensor
constexpr float kStep = 1e-2f;       // h of the coarser central difference

std::filesystem::path fixture_config(const std::string& name) {
  return std::filesystem::path(MEGATRAIN_SOURCE_DIR) / "tests" / "fixtures" / name / "model" / "config.json";
}

// The fixture's model spec made smooth where it has kinks: every expert routed to (top-k = all experts, every group
// kept) and GPT-OSS's SwiGLU clamp out of reach (limit 1e4, same formula). A top-k choice is piecewise constant and
// a clamp has a corner: a finite difference across either measures the jump, not the derivative. (The clamp's
// backward is checked in tests/backend/test_gpt_oss_ops.cpp, the top-k's in test_moe.cpp.)
ModelSpec smooth(ModelSpec spec) {
  for (LayerSpec& l : spec.layers) {
    l.moe.top_k = l.moe.num_experts;
    l.moe.topk_groups = l.moe.groups;
    if (l.moe.clamped_swiglu()) l.moe.swiglu_limit = 1e4;
  }
  return spec;
}

// A fixture's model in a LayerHarness (random weights, a padded batch, the layer input and the functional's
// weights), with every RoPE table of the model and the ALiBi slopes of its layers bound.
struct FixtureModel {
  LayerHarness h;
  std::vector<RopeTable> rope;
  std::vector<std::vector<float>> alibi;

  explicit FixtureModel(const std::string& name)
      : h(smooth(load_model_spec(fixture_config(name), true))) {
    rope.reserve(h.spec.rope_tables.size());
    h.ctx.rope.clear();
    for (const RopeSpec& t : h.spec.rope_tables) {
      rope.push_back(make_rope_table(t, 32));
      h.ctx.rope.push_back({rope.back().cos.data(), rope.back().sin.data(), rope.back().rot_dim, t.interleaved});
    }
    alibi.reserve(h.spec.layers.size());
    for (const LayerSpec& l : h.spec.layers) {
      alibi.push_back(l.attention.alibi ? alibi_slopes(l.attention.num_heads) : std::vector<float>{});
      h.ctx.alibi_slopes.push_back(alibi.back().empty() ? nullptr : alibi.back().data());
    }
  }

  double head_loss() {  // Σ cross-entropy over the batch's targets
    const int64_t head = h.store.num_regions() - 1;
    head_prepare(h.ctx, h.store.master(head), h.ws);
    return head_loss_only(h.ctx, h.store.master(head), h.store.master(0), h.x.data(), h.mb, h.ws);
  }
};

// ∂f/∂value: (4·D(h/2) − D(h)) / 3 with D(h) the central difference of step h.
double numeric_derivative(float* value, const std::function<double()>& f) {
  const float saved = *value;
  const auto central = [&](float h) {
    *value = saved + h;
    const double up = f();
    *value = saved - h;
    const double down = f();
    *value = saved;
    return (up - down) / (2.0 * static_cast<double>(h));
  };
  return (4.0 * central(kStep / 2) - central(kStep)) / 3.0;
}

constexpr int kSamples = 6;  // elements per tensor

// Up to kSamples element indices of a tensor of n elements: all of a small one, else a seeded sample.
std::vector<int64_t> sample(int64_t n, std::mt19937& pick) {
  std::vector<int64_t> out;
  if (n <= kSamples) {
    for (int64_t i = 0; i < n; ++i) out.push_back(i);
  } else {
    for (int k = 0; k < kSamples; ++k) out.push_back(static_cast<int64_t>(pick() % static_cast<uint64_t>(n)));
  }
  return out;
}

// kSamples input elements of valid tokens.
std::vector<int64_t> input_sample(const LayerHarness& h, std::mt19937& pick) {
  std::vector<int64_t> rows;
  for (int k = 0; k < kSamples; ++k) {
    const int64_t b = k % h.mb.seqs, t = static_cast<int64_t>(pick() % static_cast<uint32_t>(h.batch.seq_lens[b]));
    rows.push_back((b * h.mb.seq_len + t) * h.spec.hidden_size + static_cast<int64_t>(pick() % h.spec.hidden_size));
  }
  return rows;
}

// The tensor at `base` (offsets `idx`): analytic against numeric, and the analytic 1 % off is rejected.
void check_tensor(const std::string& what, float* base, const float* analytic_base, const std::vector<int64_t>& idx,
                  const std::function<double()>& f) {
  std::vector<double> numeric, analytic, off;
  std::mt19937 rng(17);
  std::normal_distribution<double> d(0.0, 1.0);
  for (const int64_t i : idx) {
    numeric.push_back(numeric_derivative(base + i, f));
    analytic.push_back(analytic_base[i]);
  }
  double norm = 0, noise_norm = 0;
  std::vector<double> noise;
  for (const double a : analytic) norm += a * a, noise.push_back(d(rng)), noise_norm += noise.back() * noise.back();
  for (size_t k = 0; k < analytic.size(); ++k)
    off.push_back(analytic[k] + 1e-2 * std::sqrt(norm / noise_norm) * noise[k]);
  INFO(what << ": ‖analytic‖ " << std::sqrt(norm) << ", relative error " << mt::test::rel_err(analytic, numeric));
  if (norm == 0) {  // a tensor without gradient (a selection bias): the difference is rounding only
    double numeric_norm = 0;
    for (const double x : numeric) numeric_norm += x * x;
    CHECK(std::sqrt(numeric_norm) <= 1e-3);
    return;
  }
  CHECK(mt::test::rel_err(analytic, numeric) <= kTolerance);
  CHECK(mt::test::rel_err(off, numeric) > kTolerance);
}

// One OpenMP thread while it lives: thousands of forwards of a few dozen tokens spend their time in the parallel
// regions' start-up otherwise (75 s against 3 s on a busy 2-core host). The CPU ops give the same bits for any
// thread count.
struct OneThread {
  int saved = omp_get_max_threads();
  OneThread() { omp_set_num_threads(1); }
  ~OneThread() { omp_set_num_threads(saved); }
};

void check_layers(const std::string& name) {
  const OneThread one;
  FixtureModel m(name);
  LayerHarness& h = m.h;
  for (int64_t layer = 0; layer < static_cast<int64_t>(h.spec.layers.size()); ++layer) {
    std::vector<float> dx(h.x.size()), dy(h.r), dw(static_cast<size_t>(h.layout.layer(layer).numel), 0.0f);
    decoder_layer_backward(h.ctx, layer, h.store.master(layer + 1), h.x.data(), dy.data(), dx.data(), dw.data(), h.mb,
                           h.ws);
    const auto f = [&] { return h.functional(layer); };
    std::mt19937 pick(11 + static_cast<uint32_t>(layer));
    for (const ParamSlot& slot : h.layout.layer(layer).params) {
      std::vector<int64_t> idx = sample(slot.numel, pick);
      for (int64_t& i : idx) i += slot.offset;
      check_tensor(name + " layer " + std::to_string(layer) + " " + slot.hf_name, h.store.master(layer + 1), dw.data(),
                   idx, f);
    }
    check_tensor(name + " layer " + std::to_string(layer) + " input", h.x.data(), dx.data(), input_sample(h, pick), f);
  }
}

}  // namespace

// Every dense family's fixture: GQA and MQA, biases, q/k norms (per head and whole-projection), sliding windows,
// soft-caps, sandwich and post-block norms, GeGLU, fused projections, partial and interleaved rotary, ALiBi, NoPE
// layers, residual multipliers.
TEST_CASE("every block's backward matches finite differences: dense families", "[engine][gradcheck][dense]") {
  for (const std::string name : {"llama", "qwen2", "qwen3", "mistral", "gemma2", "gemma3", "phi3", "glm4", "internlm2",
                                 "baichuan2_7b", "baichuan2_13b", "seed_oss", "ernie4_5", "smollm3", "granite",
                                 "hunyuan_dense", "olmo2", "olmo3", "exaone4"})
    check_layers(name);
}

// Softmax-routed experts with and without a gated shared expert, sigmoid group routing, biased SwiGLU experts with
// attention sinks, Llama 4's input-scaled experts and NoPE layers; Gated DeltaNet with gated attention, both fused
// layouts, dense and MoE.
TEST_CASE("every block's backward matches finite differences: MoE and hybrid families", "[engine][gradcheck][moe]") {
  for (const std::string name : {"mixtral", "qwen2_moe", "qwen3_moe", "gpt_oss", "glm4_moe", "llama4", "qwen3_5",
                                 "qwen3_next", "qwen3_5_moe", "qwen3_next_moe"})
    check_layers(name);
}

TEST_CASE("the final norm, LM head and cross-entropy backward matches finite differences",
          "[engine][gradcheck][head]") {
  for (const std::string name : {"llama", "qwen2", "gemma2", "baichuan2_7b"}) {  // untied, tied, soft-capped, NormHead
    const OneThread one;
    FixtureModel m(name);
    LayerHarness& h = m.h;
    const int64_t head = h.store.num_regions() - 1;
    std::vector<float> dx(h.x.size()), dhead(static_cast<size_t>(h.layout.regions.back().numel), 0.0f),
        dtable(static_cast<size_t>(h.layout.regions.front().numel), 0.0f);
    head_prepare(h.ctx, h.store.master(head), h.ws);
    head_forward_backward(h.ctx, h.store.master(head), h.store.master(0), h.x.data(), dx.data(), dhead.data(),
                          dtable.data(), h.mb, 1.0f, h.ws);
    head_finish(h.ctx, h.store.master(head), dhead.data(), h.ws);
    const auto f = [&] { return m.head_loss(); };
    std::mt19937 pick(23);
    for (const ParamSlot& slot : h.layout.regions.back().params) {
      std::vector<int64_t> idx = sample(slot.numel, pick);
      for (int64_t& i : idx) i += slot.offset;
      check_tensor(name + " head " + slot.hf_name, h.store.master(head), dhead.data(), idx, f);
    }
    if (h.spec.tie_word_embeddings) {
      std::vector<int64_t> idx = sample(h.layout.regions.front().numel, pick);
      check_tensor(name + " tied embedding (as the head)", h.store.master(0), dtable.data(), idx, f);
    }
    check_tensor(name + " head input", h.x.data(), dx.data(), input_sample(h, pick), f);
  }
}
