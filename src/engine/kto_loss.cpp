// KTO's loss and its derivatives (see kto_loss.h). Formulas are TRL's kto_loss and LLaMA-Factory's
// get_batch_loss_metrics, differentiated by hand; tools/make_preference_fixtures.py checks them against PyTorch.
// Invariant: d_logp is the exact derivative of the batch loss with respect to the example's SUMMED log-probability,
// including the ftx term's 1/tokens and N/C² rescaling.
#include "engine/kto_loss.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace mt {
namespace {

double sigmoid(double z) { return z >= 0.0 ? 1.0 / (1.0 + std::exp(-z)) : std::exp(z) / (1.0 + std::exp(z)); }

}  // namespace

double kto_kl(const std::vector<double>& policy, const std::vector<double>& reference) {
  MT_ASSERT(policy.size() == reference.size() && !policy.empty());
  double sum = 0.0;
  for (size_t i = 0; i < policy.size(); ++i) sum += policy[i] - reference[i];
  return std::max(sum / static_cast<double>(policy.size()), 0.0);
}

KtoTerms kto_example_terms(const KtoOptions& o, const KtoExample& e, double kl, const KtoBatchShape& shape) {
  MT_ASSERT(shape.examples > 0 && (!e.desirable || shape.desirable > 0));
  const double n = static_cast<double>(shape.examples);
  const double ratio = e.logp - e.reference_logp;
  KtoTerms t;
  t.reward = o.beta * ratio;
  if (e.desirable) {  // 1 − σ(β(r − kl)); ∂/∂r = −β σ(z)(1 − σ(z))
    const double s = sigmoid(o.beta * (ratio - kl));
    t.loss = o.desirable_weight * (1.0 - s) / n;
    t.d_logp = -o.desirable_weight * o.beta * s * (1.0 - s) / n;
    if (o.ftx > 1e-6) {  // ftx · mean_C(−logp/T) / C · N
      const double c = static_cast<double>(shape.desirable);
      const double tokens = static_cast<double>(std::max<int64_t>(e.tokens, 1));
      t.loss += o.ftx * (-e.logp / tokens) * n / (c * c);
      t.d_logp -= o.ftx * n / (c * c * tokens);
    }
  } else {  // 1 − σ(β(kl − r)); ∂/∂r = +β σ(z)(1 − σ(z))
    const double s = sigmoid(o.beta * (kl - ratio));
    t.loss = o.undesirable_weight * (1.0 - s) / n;
    t.d_logp = o.undesirable_weight * o.beta * s * (1.0 - s) / n;
  }
  return t;
}

void KtoMetrics::add(const KtoExample& e, const KtoTerms& t, const KtoBatchShape& shape) {
  ++examples_;
  loss_ += t.loss * static_cast<double>(shape.examples);  // Σ over the batch: its loss × N
  if (e.desirable) {
    ++desirable_;
    chosen_reward_ += t.reward;
    chosen_logp_ += e.logp;
    sft_loss_ += -e.logp / static_cast<double>(std::max<int64_t>(e.tokens, 1));
  } else {
    rejected_reward_ += t.reward;
    rejected_logp_ += e.logp;
  }
}

void KtoMetrics::add_kl(double kl, const KtoBatchShape& shape) { kl_ += kl * static_cast<double>(shape.examples); }

std::vector<double> KtoMetrics::totals() const {
  return {static_cast<double>(examples_), static_cast<double>(desirable_), loss_, kl_, chosen_reward_,
          rejected_reward_, chosen_logp_, rejected_logp_, sft_loss_};
}

KtoMetrics KtoMetrics::from_totals(const double* t) {
  KtoMetrics m;
  m.examples_ = static_cast<int64_t>(t[0]);
  m.desirable_ = static_cast<int64_t>(t[1]);
  m.loss_ = t[2];
  m.kl_ = t[3];
  m.chosen_reward_ = t[4];
  m.rejected_reward_ = t[5];
  m.chosen_logp_ = t[6];
  m.rejected_logp_ = t[7];
  m.sft_loss_ = t[8];
  return m;
}

void KtoMetrics::merge(const KtoMetrics& o) {
  examples_ += o.examples_;
  desirable_ += o.desirable_;
  loss_ += o.loss_;
  kl_ += o.kl_;
  chosen_reward_ += o.chosen_reward_;
  rejected_reward_ += o.rejected_reward_;
  chosen_logp_ += o.chosen_logp_;
  rejected_logp_ += o.rejected_logp_;
  sft_loss_ += o.sft_loss_;
}

}  // namespace mt
