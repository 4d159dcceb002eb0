// Pairwise preference losses and their derivatives (see preference_loss.h). Formulas are LLaMA-Factory's and TRL's,
// differentiated by hand; tools/make_preference_fixtures.py checks them against PyTorch's autograd and TRL.
// Invariant: d_chosen / d_rejected are exact derivatives of `loss` with respect to the SUMMED log-probabilities,
// including the 1/tokens of the losses that average.
#include "engine/preference_loss.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace mt {
namespace {

// log σ(z) without overflow.
double log_sigmoid(double z) { return z >= 0.0 ? -std::log1p(std::exp(-z)) : z - std::log1p(std::exp(z)); }
double sigmoid(double z) { return z >= 0.0 ? 1.0 / (1.0 + std::exp(-z)) : std::exp(z) / (1.0 + std::exp(z)); }

double tokens_of(const SequenceLogp& s) { return static_cast<double>(std::max<int64_t>(s.tokens, 1)); }

}  // namespace

PreferenceLossType preference_loss_type(const std::string& name) {
  if (name == "sigmoid") return PreferenceLossType::sigmoid;
  if (name == "hinge") return PreferenceLossType::hinge;
  if (name == "ipo") return PreferenceLossType::ipo;
  if (name == "orpo") return PreferenceLossType::orpo;
  if (name == "simpo") return PreferenceLossType::simpo;
  throw Error("pref_loss: '" + name + "' is not one of sigmoid, hinge, ipo, orpo, simpo");
}

bool averages_logps(PreferenceLossType type) {
  return type == PreferenceLossType::ipo || type == PreferenceLossType::orpo || type == PreferenceLossType::simpo;
}

bool uses_reference(PreferenceLossType type) {
  return type != PreferenceLossType::orpo && type != PreferenceLossType::simpo;
}

PairTerms preference_pair_terms(const PreferenceOptions& o, const SequenceLogp& chosen, const SequenceLogp& rejected,
                                const SequenceLogp& reference_chosen, const SequenceLogp& reference_rejected) {
  const bool avg = averages_logps(o.type);
  // The log-probabilities the loss sees (averaged or summed) and their derivative with respect to the sum.
  const double scale_c = avg ? 1.0 / tokens_of(chosen) : 1.0, scale_r = avg ? 1.0 / tokens_of(rejected) : 1.0;
  const double c = chosen.logp * scale_c, r = rejected.logp * scale_r;
  PairTerms p;
  p.chosen_logp = c;
  p.rejected_logp = r;
  double dc = 0.0, dr = 0.0;  // ∂loss/∂c, ∂loss/∂r
  if (uses_reference(o.type)) {
    const double c0 = reference_chosen.logp * (avg ? 1.0 / tokens_of(reference_chosen) : 1.0);
    const double r0 = reference_rejected.logp * (avg ? 1.0 / tokens_of(reference_rejected) : 1.0);
    const double logits = (c - r) - (c0 - r0);
    double dlogits = 0.0;
    if (o.type == PreferenceLossType::sigmoid) {
      const double z = o.beta * logits, e = o.label_smoothing;
      p.loss = -log_sigmoid(z) * (1.0 - e) - log_sigmoid(-z) * e;
      dlogits = o.beta * (-(1.0 - e) * sigmoid(-z) + e * sigmoid(z));
    } else if (o.type == PreferenceLossType::hinge) {
      const double margin = 1.0 - o.beta * logits;
      p.loss = std::max(margin, 0.0);
      dlogits = margin > 0.0 ? -o.beta : 0.0;
    } else {  // ipo
      const double h = logits - 1.0 / (2.0 * o.beta);
      p.loss = h * h;
      dlogits = 2.0 * h;
    }
    dc = dlogits;
    dr = -dlogits;
    p.chosen_reward = o.beta * (c - c0);
    p.rejected_reward = o.beta * (r - r0);
  } else if (o.type == PreferenceLossType::orpo) {
    // log odds = (c − r) − (log(1 − e^c) − log(1 − e^r)); ∂/∂c = 1/(1 − e^c), ∂/∂r = −1/(1 − e^r)
    const double log_odds = (c - r) - (std::log1p(-std::exp(c)) - std::log1p(-std::exp(r)));
    p.odds_ratio_loss = -log_sigmoid(log_odds);
    p.loss = -c + o.beta * p.odds_ratio_loss;
    const double dlog_odds = -o.beta * sigmoid(-log_odds);
    dc = -1.0 + dlog_odds / -std::expm1(c);
    dr = -dlog_odds / -std::expm1(r);
    p.chosen_reward = o.beta * c;
    p.rejected_reward = o.beta * r;
  } else {  // simpo
    const double z = o.beta * ((c - r) - o.simpo_gamma / o.beta);
    p.loss = -log_sigmoid(z);
    dc = -o.beta * sigmoid(-z);
    dr = -dc;
    p.chosen_reward = o.beta * c;
    p.rejected_reward = o.beta * r;
  }
  p.d_chosen = dc * scale_c;
  p.d_rejected = dr * scale_r;
  p.sft_loss = -chosen.logp / tokens_of(chosen);
  if (o.ftx > 1e-6) {  // LLaMA-Factory adds the term only above 1e-6
    p.loss += o.ftx * p.sft_loss;
    p.d_chosen -= o.ftx / tokens_of(chosen);
  }
  return p;
}

void PreferenceMetrics::add(const PairTerms& p) {
  ++pairs_;
  loss_ += p.loss;
  chosen_reward_ += p.chosen_reward;
  rejected_reward_ += p.rejected_reward;
  accurate_ += p.chosen_reward > p.rejected_reward ? 1.0 : 0.0;
  chosen_logp_ += p.chosen_logp;
  rejected_logp_ += p.rejected_logp;
  sft_loss_ += p.sft_loss;
  odds_ratio_loss_ += p.odds_ratio_loss;
}

std::vector<double> PreferenceMetrics::totals() const {
  return {static_cast<double>(pairs_), loss_, chosen_reward_, rejected_reward_, accurate_, chosen_logp_, rejected_logp_,
          sft_loss_, odds_ratio_loss_};
}

PreferenceMetrics PreferenceMetrics::from_totals(const double* t) {
  PreferenceMetrics m;
  m.pairs_ = static_cast<int64_t>(t[0]);
  m.loss_ = t[1];
  m.chosen_reward_ = t[2];
  m.rejected_reward_ = t[3];
  m.accurate_ = t[4];
  m.chosen_logp_ = t[5];
  m.rejected_logp_ = t[6];
  m.sft_loss_ = t[7];
  m.odds_ratio_loss_ = t[8];
  return m;
}

void PreferenceMetrics::merge(const PreferenceMetrics& other) {
  pairs_ += other.pairs_;
  loss_ += other.loss_;
  chosen_reward_ += other.chosen_reward_;
  rejected_reward_ += other.rejected_reward_;
  accurate_ += other.accurate_;
  chosen_logp_ += other.chosen_logp_;
  rejected_logp_ += other.rejected_logp_;
  sft_loss_ += other.sft_loss_;
  odds_ratio_loss_ += other.odds_ratio_loss_;
}

}  // namespace mt
