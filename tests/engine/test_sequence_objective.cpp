// The engine's per-sequence objective (preference training): each sequence's summed log-probability from the
// forward-only pass, and the gradients of Σ c_i·logp_i from forward_backward with a SequenceObjective, against the
// cross-entropy training path (c_i = −1/N: bitwise the mean CE's gradients) and against each sequence's own CE
// gradient weighted by hand (pairs kept together across gradient accumulation passes).
#include <cmath>

#include "backend/backend.h"
#include "catch.h"
#include "engine/engine.h"
#include "engine/tiny_model.h"

using namespace mt;
using namespace mt::testing;

namespace {

// Σ c_i·logp_i with fixed c (one per sequence of the batch), checking the passes' sequences and log-probabilities.
class LinearObjective final : public SequenceObjective {
 public:
  explicit LinearObjective(std::vector<double> c) : c_(std::move(c)) {}
  int64_t group_size() const override { return 2; }
  void weigh(int64_t first_seq, const std::vector<double>& logps, std::vector<double>& d_logp) override {
    REQUIRE(first_seq % 2 == 0);
    REQUIRE(logps.size() % 2 == 0);
    for (size_t i = 0; i < logps.size(); ++i) {
      d_logp[i] = c_[static_cast<size_t>(first_seq) + i];
      seen.push_back(logps[i]);
    }
  }
  std::vector<double> seen;

 private:
  std::vector<double> c_;
};

struct Fixture {
  ModelSpec spec = tiny_spec(3, false);
  ParamLayout layout = make_param_layout(spec);
  HostStore store{layout, DType::f32};
  Fixture() { fill_random(store, 21); }
  std::vector<std::vector<float>> grads() const {
    std::vector<std::vector<float>> g;
    for (int64_t r = 0; r < store.num_regions(); ++r)
      g.emplace_back(store.grad(r), store.grad(r) + layout.regions[static_cast<size_t>(r)].numel);
    return g;
  }
};

EngineOptions options(int64_t passes, int64_t micro_batch) {
  EngineOptions o;
  o.max_positions = 32;
  o.passes = passes;
  o.micro_batch_size = micro_batch;
  o.checkpoint_interval = 2;
  o.recompute_layers = 1;
  return o;
}

// The batch with only sequence `keep`'s targets left.
Batch only_sequence(const Batch& batch, int64_t keep) {
  Batch b = batch;
  for (int64_t i = 0; i < b.num_seqs; ++i)
    if (i != keep) std::fill_n(b.targets.begin() + i * b.seq_len, b.seq_len, kIgnoreIndex);
  b.num_target_tokens = 0;
  for (int32_t t : b.targets) b.num_target_tokens += t != kIgnoreIndex;
  return b;
}

}  // namespace

TEST_CASE("a uniform sequence objective trains exactly as the mean cross-entropy", "[engine][preference]") {
  auto be = make_cpu_backend();
  for (int64_t passes : {1, 2})
    for (int64_t mb : {0, 1}) {
      INFO("passes " << passes << " micro_batch " << mb);
      Fixture f;
      Engine engine(*be, f.spec, f.store, options(passes, mb));
      const Batch batch = tiny_batch(f.spec.vocab_size, 4);
      const StepLoss ce = engine.forward_backward(batch);
      const auto want = f.grads();
      const double n = static_cast<double>(batch.num_target_tokens);
      LinearObjective objective(std::vector<double>(4, -1.0 / n));
      const StepLoss seq = engine.forward_backward(batch, objective);
      CHECK(seq.loss_sum == ce.loss_sum);
      CHECK(f.grads() == want);  // 1 × (1/N as fp32) is the CE path's scale, bit for bit
      // The forward-only log-probabilities are the objective's, and sum to −Σ CE.
      const std::vector<double> logps = engine.sequence_logps(batch);
      CHECK(logps == objective.seen);
      double sum = 0;
      for (double l : logps) sum += l;
      CHECK(std::abs(sum + ce.loss_sum) <= 1e-5 * ce.loss_sum);
    }
}

TEST_CASE("a weighted sequence objective's gradient is the sum of each sequence's weighted gradient",
          "[engine][preference]") {
  auto be = make_cpu_backend();
  const std::vector<double> c = {0.7, -1.3, 0.25, -0.4};
  Fixture f;
  const Batch batch = tiny_batch(f.spec.vocab_size, 4);
  // Each sequence alone: forward_backward gives ∂(mean CE)/∂θ = −(1/n_i)·∂logp_i/∂θ.
  std::vector<std::vector<double>> want;
  {
    Engine engine(*be, f.spec, f.store, options(1, 0));
    for (int64_t i = 0; i < 4; ++i) {
      const Batch one = only_sequence(batch, i);
      engine.forward_backward(one);
      const auto g = f.grads();
      if (want.empty())
        for (const auto& region : g) want.emplace_back(region.size(), 0.0);
      const double factor = -c[static_cast<size_t>(i)] * static_cast<double>(one.num_target_tokens);
      for (size_t r = 0; r < g.size(); ++r)
        for (size_t k = 0; k < g[r].size(); ++k) want[r][k] += factor * g[r][k];
    }
  }
  for (int64_t passes : {1, 2}) {
    INFO("passes " << passes);
    Engine engine(*be, f.spec, f.store, options(passes, 1));
    LinearObjective objective(c);
    engine.forward_backward(batch, objective);
    const auto got = f.grads();
    for (size_t r = 0; r < got.size(); ++r) {
      double diff = 0, norm = 0;
      for (size_t k = 0; k < got[r].size(); ++k) {
        diff += (got[r][k] - want[r][k]) * (got[r][k] - want[r][k]);
        norm += want[r][k] * want[r][k];
      }
      INFO("region " << r);
      CHECK(std::sqrt(diff) <= 1e-5 * std::sqrt(norm));
    }
  }
}
