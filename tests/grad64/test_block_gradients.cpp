// Every block's backward against finite differences in fp64, on the CPU backend compiled with MT_REAL_DOUBLE
// (core/real.h), with no PyTorch: for every family's golden fixture model (tests/fixtures/<case>/model/config.json:
// attention with GQA, biases, q/k RMS and LayerNorms, sliding windows, soft-caps, sinks, ALiBi, output gates and
// partial / interleaved RoPE; multi-head latent attention; GLU and plain MLPs; MoE with shared experts and clamped
// SwiGLU; Gated DeltaNet; RMS norms with w and (1 + w), LayerNorms, sandwich norms, parallel residuals), the token
// embedding, every decoder layer, and the final norm + LM head + cross-entropy. A layer's functional is a random
// projection Σ r·y of its output (the head's: its loss). Forward and backward run in fp64, so the derivative is a
// Richardson-extrapolated central difference in fp64, (4·D(h/2) − D(h)) / 3 with h = 3e-4: truncation O(h⁴),
// rounding about 1e-16·|f|/h. Each tensor is compared on up to 6 elements (every element of smaller tensors):
// ‖analytic − numeric‖ within 1e-8·‖numeric‖ + 1e-10 (the floor for a gradient that vanishes, a selection bias's).
// Measured: 2.8e-9 relative at worst over the 1846 tensors (the rounding term; the same under OpenBLAS's Prescott,
// Sandy Bridge, Haswell and Skylake-X kernels), median 5e-11; a plain central difference reaches 3e-8 at best (h
// 1e-5: truncation on the DeltaNet layers' norms and convolutions; 3e-7 at h 1e-6: rounding). Any fp32 rounding left
// in the fp64 path (1e-7) fails it, and the analytic gradient 1e-4 off (relative L2, in a seeded random direction)
// is checked to fail it. MoE layers route to every expert and GPT-OSS's clamp is out of reach here (smooth()): finite
// differences across a choice or a corner measure a jump.
#include <cmath>
#include <filesystem>
#include <functional>
#include <random>

#include <omp.h>

#include "backend/grad_check.h"
#include "catch.h"
#include "engine/edge_layers.h"
#include "engine/layer_harness.h"

using namespace mt;
using namespace mt::testing;

namespace {

static_assert(sizeof(real) == 8, "tests_grad64 compiles the CPU reference with MT_REAL_DOUBLE");

constexpr double kTolerance = 1e-8;  // relative L2 per tensor
constexpr double kFloor = 1e-10;     // absolute, for vanishing gradients
constexpr double kOff = 1e-4;        // the relative error of a wrong gradient, which must fail
constexpr real kStep = 3e-4;         // h of the coarser central difference

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

// ∂f/∂value: (4·D(h/2) − D(h)) / 3 with D(h) the central difference of step h.
double numeric_derivative(real* value, const std::function<double()>& f) {
  const real saved = *value;
  const auto central = [&](real h) {
    const real up_at = saved + h, down_at = saved - h;
    *value = up_at;
    const double up = f();
    *value = down_at;
    const double down = f();
    *value = saved;
    return (up - down) / (up_at - down_at);
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

// kSamples elements of valid tokens' rows of a [tokens, hidden] tensor.
std::vector<int64_t> input_sample(const LayerHarness& h, std::mt19937& pick) {
  std::vector<int64_t> rows;
  for (int k = 0; k < kSamples; ++k) {
    const int64_t b = k % h.mb.seqs, t = static_cast<int64_t>(pick() % static_cast<uint32_t>(h.batch.seq_lens[b]));
    rows.push_back((b * h.mb.seq_len + t) * h.spec.hidden_size + static_cast<int64_t>(pick() % h.spec.hidden_size));
  }
  return rows;
}

double norm2(const std::vector<double>& v) {
  double s = 0;
  for (const double x : v) s += x * x;
  return std::sqrt(s);
}

// ‖a − n‖ within kTolerance · ‖n‖ + kFloor.
bool matches(const std::vector<double>& a, const std::vector<double>& n) {
  std::vector<double> d;
  for (size_t k = 0; k < a.size(); ++k) d.push_back(a[k] - n[k]);
  return norm2(d) <= kTolerance * norm2(n) + kFloor;
}

// The tensor at `base` (offsets `idx`): analytic against numeric, and the analytic kOff off (relative L2, in a
// seeded random direction) is rejected where the gradient is above the floor.
void check_tensor(const std::string& what, real* base, const real* analytic_base, const std::vector<int64_t>& idx,
                  const std::function<double()>& f) {
  std::vector<double> numeric, analytic;
  for (const int64_t i : idx) {
    numeric.push_back(numeric_derivative(base + i, f));
    analytic.push_back(analytic_base[i]);
  }
  std::mt19937 rng(17);
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<double> noise, off;
  for (size_t k = 0; k < analytic.size(); ++k) noise.push_back(d(rng));
  for (size_t k = 0; k < analytic.size(); ++k) off.push_back(analytic[k] + kOff * norm2(analytic) / norm2(noise) * noise[k]);
  INFO(what << ": ‖analytic‖ " << norm2(analytic) << ", relative error " << mt::test::rel_err(analytic, numeric));
  CHECK(matches(analytic, numeric));
  if (kOff * norm2(analytic) > 10 * kFloor) CHECK_FALSE(matches(off, numeric));
}

// One OpenMP thread while it lives: thousands of forwards of a few dozen tokens spend their time in the parallel
// regions' start-up otherwise. The CPU ops give the same bits for any thread count.
struct OneThread {
  int saved = omp_get_max_threads();
  OneThread() { omp_set_num_threads(1); }
  ~OneThread() { omp_set_num_threads(saved); }
};

// The token embedding: Σ r·embedding(table) against dtable on rows of the batch's valid tokens (nn.Embedding's
// padding_idx row is left out: its gradient is zero by definition, not the derivative).
void check_embedding(const std::string& name, LayerHarness& h) {
  std::vector<real> dy = h.r, y(h.x.size()), dtable(h.regions.front().size(), 0.0);
  embedding_backward(h.ctx, dtable.data(), dy.data(), h.mb, h.batch.input_ids.data());
  const auto f = [&] {
    embedding_forward(h.ctx, h.weights(0), y.data(), h.mb);
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += double(h.r[i]) * y[i];
    return s;
  };
  std::mt19937 pick(5);
  std::vector<int64_t> idx;
  for (const int64_t i : input_sample(h, pick)) {
    const int32_t id = h.batch.input_ids[static_cast<size_t>(i / h.spec.hidden_size)];
    if (id != h.spec.padding_idx) idx.push_back(id * h.spec.hidden_size + i % h.spec.hidden_size);
  }
  check_tensor(name + " embedding", h.weights(0), dtable.data(), idx, f);
}

void check_layers(const std::string& name, LayerHarness& h) {
  for (int64_t layer = 0; layer < static_cast<int64_t>(h.spec.layers.size()); ++layer) {
    std::vector<real> dx(h.x.size()), dy(h.r), dw(static_cast<size_t>(h.layout.layer(layer).numel), 0.0);
    decoder_layer_backward(h.ctx, layer, h.weights(layer + 1), h.x.data(), dy.data(), dx.data(), dw.data(), h.mb,
                           h.ws);
    const auto f = [&] { return h.functional(layer); };
    std::mt19937 pick(11 + static_cast<uint32_t>(layer));
    for (const ParamSlot& slot : h.layout.layer(layer).params) {
      std::vector<int64_t> idx = sample(slot.numel, pick);
      for (int64_t& i : idx) i += slot.offset;
      check_tensor(name + " layer " + std::to_string(layer) + " " + slot.hf_name, h.weights(layer + 1), dw.data(), idx,
                   f);
    }
    check_tensor(name + " layer " + std::to_string(layer) + " input", h.x.data(), dx.data(), input_sample(h, pick), f);
  }
}

// The final norm, LM head and cross-entropy: its loss Σ CE against dhead, dx and (tied) the table's gradient.
void check_head(const std::string& name, LayerHarness& h) {
  const int64_t head = h.head_region();
  std::vector<real> dx(h.x.size()), dhead(h.regions.back().size(), 0.0), dtable(h.regions.front().size(), 0.0);
  head_prepare(h.ctx, h.weights(head), h.ws);
  head_forward_backward(h.ctx, h.weights(head), h.weights(0), h.x.data(), dx.data(), dhead.data(), dtable.data(),
                        h.mb, 1.0f, h.ws);
  head_finish(h.ctx, h.weights(head), dhead.data(), h.ws);
  const auto f = [&] {
    head_prepare(h.ctx, h.weights(head), h.ws);
    return head_loss_only(h.ctx, h.weights(head), h.weights(0), h.x.data(), h.mb, h.ws);
  };
  std::mt19937 pick(23);
  for (const ParamSlot& slot : h.layout.regions.back().params) {
    std::vector<int64_t> idx = sample(slot.numel, pick);
    for (int64_t& i : idx) i += slot.offset;
    check_tensor(name + " head " + slot.hf_name, h.weights(head), dhead.data(), idx, f);
  }
  if (h.spec.tie_word_embeddings)
    check_tensor(name + " tied embedding (as the head)", h.weights(0), dtable.data(),
                 sample(static_cast<int64_t>(h.regions.front().size()), pick), f);
  check_tensor(name + " head input", h.x.data(), dx.data(), input_sample(h, pick), f);
}

void check_model(const std::string& name) {
  const OneThread one;
  LayerHarness h(smooth(load_model_spec(fixture_config(name), true)));
  check_embedding(name, h);
  check_layers(name, h);
  check_head(name, h);
}

}  // namespace

// Every dense family's fixture: GQA and MQA, biases, q/k norms (per head and whole-projection), sliding windows,
// soft-caps, sandwich and post-block norms, GeGLU, fused projections, partial and interleaved rotary, ALiBi, NoPE
// layers, residual multipliers, embedding and logit scales, tied and normalised (NormHead) LM heads, final soft-caps.
TEST_CASE("every block's backward matches fp64 finite differences: dense families", "[grad64][dense]") {
  for (const std::string name : {"llama", "qwen2", "qwen3", "mistral", "gemma2", "gemma3", "phi3", "glm4", "internlm2",
                                 "baichuan2_7b", "baichuan2_13b", "seed_oss", "ernie4_5", "smollm3", "granite",
                                 "hunyuan_dense", "olmo2", "olmo3", "exaone4"})
    check_model(name);
}

// LayerNorm with and without bias, per-head q/k LayerNorms, parallel residuals and the non-gated MLP.
TEST_CASE("every block's backward matches fp64 finite differences: LayerNorm families", "[grad64][layernorm]") {
  for (const std::string name : {"cohere", "cohere2", "starcoder2"}) check_model(name);
}

// Softmax-routed experts with and without a gated shared expert, sigmoid group routing, biased SwiGLU experts with
// attention sinks, Llama 4's input-scaled experts and NoPE layers; Gated DeltaNet with gated attention, both fused
// layouts, dense and MoE; multi-head latent attention with and without a q LoRA, dense and MoE.
TEST_CASE("every block's backward matches fp64 finite differences: MoE, hybrid and MLA families", "[grad64][moe]") {
  for (const std::string name : {"mixtral", "qwen2_moe", "qwen3_moe", "gpt_oss", "glm4_moe", "llama4", "qwen3_5",
                                 "qwen3_next", "qwen3_5_moe", "qwen3_next_moe", "deepseek_v2", "deepseek_v3",
                                 "glm4_moe_lite"})
    check_model(name);
}
