// KTO's loss (engine/kto_loss.h): each example's derivative is the exact derivative of the batch loss with respect
// to its summed log-probability (central differences, the KL estimate and the batch's counts held, as LLaMA-Factory
// holds them: no gradient), with and without pref_ftx's rescaled term; the KL estimate is clamped at 0; the metrics
// are the means LLaMA-Factory logs. The loss values themselves are checked against PyTorch by the [kto] parity cases.
#include <cmath>
#include <vector>

#include "catch.h"
#include "engine/kto_loss.h"

namespace {

using mt::KtoBatchShape;
using mt::KtoExample;
using mt::KtoOptions;

double batch_loss(const KtoOptions& o, const std::vector<KtoExample>& batch, double kl, const KtoBatchShape& shape) {
  double loss = 0.0;
  for (const KtoExample& e : batch) loss += mt::kto_example_terms(o, e, kl, shape).loss;
  return loss;
}

const std::vector<KtoExample> kBatch = {{-12.5, -11.0, 5, true},  {-30.0, -31.5, 9, false}, {-4.0, -6.5, 2, true},
                                        {-20.0, -18.0, 7, false}, {-8.25, -8.0, 3, true}};

}  // namespace

TEST_CASE("KTO's derivatives are the batch loss's, with and without pref_ftx", "[engine][kto]") {
  const KtoBatchShape shape{5, 3};
  for (const double ftx : {0.0, 0.7}) {
    const KtoOptions o{0.3, 1.2, 0.8, ftx};
    for (const double kl : {0.0, 1.7}) {
      for (size_t i = 0; i < kBatch.size(); ++i) {
        INFO("ftx " << ftx << " kl " << kl << " example " << i);
        const double h = 1e-5;
        std::vector<KtoExample> up = kBatch, down = kBatch;
        up[i].logp += h;
        down[i].logp -= h;
        const double numeric = (batch_loss(o, up, kl, shape) - batch_loss(o, down, kl, shape)) / (2 * h);
        const double exact = mt::kto_example_terms(o, kBatch[i], kl, shape).d_logp;
        CHECK(std::abs(exact - numeric) <= 1e-8 * std::max(1.0, std::abs(numeric)));
      }
    }
  }
}

TEST_CASE("KTO's KL estimate, loss and metrics are LLaMA-Factory's", "[engine][kto]") {
  CHECK(mt::kto_kl({-10.0, -12.0}, {-11.0, -11.5}) == 0.25);
  CHECK(mt::kto_kl({-10.0, -12.0}, {-9.0, -11.5}) == 0.0);  // a negative mean is clamped
  const KtoOptions o{0.1, 1.0, 1.0, 0.0};
  const KtoBatchShape shape{5, 3};
  const double kl = 0.5;
  mt::KtoMetrics m;
  m.add_kl(kl, shape);
  for (const KtoExample& e : kBatch) m.add(e, mt::kto_example_terms(o, e, kl, shape), shape);
  // The loss: the mean of 1 − σ(β(r − kl)) over the desirable and 1 − σ(β(kl − r)) over the others.
  const auto sigmoid = [](double z) { return 1.0 / (1.0 + std::exp(-z)); };
  double want = 0.0;
  for (const KtoExample& e : kBatch) {
    const double r = e.logp - e.reference_logp;
    want += 1.0 - sigmoid(0.1 * (e.desirable ? r - kl : kl - r));
  }
  CHECK(std::abs(m.loss() - want / 5.0) < 1e-15);
  CHECK(m.kl() == kl);
  CHECK(m.desirable() == 3);
  CHECK(m.undesirable() == 2);
  CHECK(std::abs(m.rewards_chosen() - 0.1 * (-1.5 + 2.5 - 0.25) / 3.0) < 1e-15);
  CHECK(std::abs(m.rewards_rejected() - 0.1 * (1.5 - 2.0) / 2.0) < 1e-15);
  CHECK(std::abs(m.logps_chosen() - (-12.5 - 4.0 - 8.25) / 3.0) < 1e-15);
  CHECK(std::abs(m.logps_rejected() - (-50.0 / 2.0)) < 1e-15);
  CHECK(std::abs(m.sft_loss() - (12.5 / 5 + 4.0 / 2 + 8.25 / 3) / 3.0) < 1e-15);
}
