// Finite-difference checks in fp64 of the layer templates over a LayerHarness (tests/engine/layer_harness.h), on the
// CPU backend compiled with MT_REAL_DOUBLE (core/real.h; tests_grad64), with no PyTorch: the token embedding, every
// decoder layer (every parameter tensor and the layer input) and the final norm + LM head + cross-entropy. A layer's
// functional is a random projection Σ r·y of its output (the head's: its loss). Forward and backward run in fp64, so
// the derivative is a Richardson-extrapolated central difference in fp64, (4·D(h/2) − D(h)) / 3 with h = 3e-4:
// truncation O(h⁴), rounding about 1e-16·|f|/h. Each tensor is compared on up to 6 elements (every element of smaller
// tensors): ‖analytic − numeric‖ within 1e-8·‖numeric‖ + 1e-10 (the floor for a gradient that vanishes, a selection
// bias's), and the analytic gradient 1e-4 off (relative L2, in a seeded random direction) must fail that.
// Measured over the 2705 tensors of the fixtures (padded and packed) and the variants: 2.8e-9 relative at worst (the
// rounding term; the same under OpenBLAS's Prescott, Sandy Bridge, Haswell and Skylake-X kernels), median 5e-11; a
// plain central difference reaches 3e-8 at best (h 1e-5: truncation on the DeltaNet layers' norms and convolutions;
// 3e-7 at h 1e-6: rounding); any fp32 rounding left in the fp64 path fails it (one in RMSNorm's row statistics: 941 of
// the fixtures' 3687 assertions).
// Invariant: every check is deterministic (seeded samples) and restores every value it perturbs.
#pragma once
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <omp.h>

#include "backend/grad_check.h"
#include "catch.h"
#include "engine/edge_layers.h"
#include "engine/layer_harness.h"

namespace mt::testing::grad64 {

static_assert(sizeof(real) == 8, "tests_grad64 compiles the CPU reference with MT_REAL_DOUBLE");

inline constexpr double kTolerance = 1e-8;  // relative L2 per tensor
inline constexpr double kFloor = 1e-10;     // absolute, for vanishing gradients
inline constexpr double kOff = 1e-4;        // the relative error of a wrong gradient, which must fail
inline constexpr real kStep = 3e-4;         // h of the coarser central difference

// ∂f/∂value: (4·D(h/2) − D(h)) / 3 with D(h) the central difference of step h.
inline double numeric_derivative(real* value, const std::function<double()>& f) {
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

inline constexpr int kSamples = 6;  // elements per tensor

// Up to kSamples element indices of a tensor of n elements: all of a small one, else a seeded sample.
inline std::vector<int64_t> sample(int64_t n, std::mt19937& pick) {
  std::vector<int64_t> out;
  if (n <= kSamples) {
    for (int64_t i = 0; i < n; ++i) out.push_back(i);
  } else {
    for (int k = 0; k < kSamples; ++k) out.push_back(static_cast<int64_t>(pick() % static_cast<uint64_t>(n)));
  }
  return out;
}

// kSamples elements of valid tokens' rows of a [tokens, hidden] tensor.
inline std::vector<int64_t> input_sample(const LayerHarness& h, std::mt19937& pick) {
  std::vector<int64_t> rows;
  for (int k = 0; k < kSamples; ++k) {
    const int64_t b = k % h.mb.seqs, t = static_cast<int64_t>(pick() % static_cast<uint32_t>(h.batch.seq_lens[b]));
    rows.push_back((b * h.mb.seq_len + t) * h.spec.hidden_size + static_cast<int64_t>(pick() % h.spec.hidden_size));
  }
  return rows;
}

inline double norm2(const std::vector<double>& v) {
  double s = 0;
  for (const double x : v) s += x * x;
  return std::sqrt(s);
}

// ‖a − n‖ within kTolerance · ‖n‖ + kFloor.
inline bool matches(const std::vector<double>& a, const std::vector<double>& n) {
  std::vector<double> d;
  for (size_t k = 0; k < a.size(); ++k) d.push_back(a[k] - n[k]);
  return norm2(d) <= kTolerance * norm2(n) + kFloor;
}

// The tensor at `base` (offsets `idx`): analytic against numeric, and the analytic kOff off (relative L2, in a
// seeded random direction) is rejected where the gradient is above the floor.
inline void check_tensor(const std::string& what, real* base, const real* analytic_base,
                         const std::vector<int64_t>& idx, const std::function<double()>& f) {
  std::vector<double> numeric, analytic;
  for (const int64_t i : idx) {
    numeric.push_back(numeric_derivative(base + i, f));
    analytic.push_back(analytic_base[i]);
  }
  std::mt19937 rng(17);
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<double> noise, off;
  for (size_t k = 0; k < analytic.size(); ++k) noise.push_back(d(rng));
  for (size_t k = 0; k < analytic.size(); ++k)
    off.push_back(analytic[k] + kOff * norm2(analytic) / norm2(noise) * noise[k]);
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
inline void check_embedding(const std::string& name, LayerHarness& h) {
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

// Every decoder layer: each parameter tensor and the layer input, against Σ r·y of the layer's output.
inline void check_layers(const std::string& name, LayerHarness& h) {
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
inline void check_head(const std::string& name, LayerHarness& h) {
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

}  // namespace mt::testing::grad64
