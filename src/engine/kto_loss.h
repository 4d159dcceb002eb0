// KTO's loss over unpaired examples, as LLaMA-Factory's CustomKTOTrainer computes it with TRL's kto_loss: each
// example's summed completion log-probability against the reference's, shifted by the batch's KL estimate, weighted
// by kto_chosen_weight or kto_rejected_weight, plus pref_ftx's SFT term on the desirable ones; with each example's
// derivative with respect to its summed log-probability, which the head's weighted backward consumes.
// Invariant: everything is fp64 on the host; an example's terms depend only on itself, the batch's KL estimate and
// the batch's counts (examples, desirable ones), so the batch loss is the sum of its examples' terms whatever
// micro-batches or ranks hold them. The KL estimate carries no gradient (LLaMA-Factory computes it under no_grad).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mt {

struct KtoOptions {
  double beta = 0.1;                // pref_beta
  double desirable_weight = 1.0;    // kto_chosen_weight
  double undesirable_weight = 1.0;  // kto_rejected_weight
  double ftx = 0.0;                 // pref_ftx: + ftx · (−desirable log-probability per response token), rescaled
};

// The batch's KL estimate: max(0, mean over its KL sequences of policy − reference summed log-probability), summed
// in sequence order.
double kto_kl(const std::vector<double>& policy_kl_logps, const std::vector<double>& reference_kl_logps);

// One example: its completion's summed log-probability under the policy and the reference, its response tokens
// (labels != −100) and its kto_tag.
struct KtoExample {
  double logp = 0.0;
  double reference_logp = 0.0;
  int64_t tokens = 0;
  bool desirable = false;
};

// The batch's shape the terms are normalised by: N examples, C of them desirable.
struct KtoBatchShape {
  int64_t examples = 0;
  int64_t desirable = 0;
};

struct KtoTerms {
  double loss = 0.0;    // the example's share of the batch loss (the batch loss is their sum)
  double d_logp = 0.0;  // ∂(batch loss)/∂(its summed log-probability)
  double reward = 0.0;  // β·(logp − reference logp): rewards/chosen or rewards/rejected
};

// The batch loss is (Σ_desirable w_d·(1 − σ(β(r − kl))) + Σ_undesirable w_u·(1 − σ(β(kl − r)))) / N, r the
// example's log-ratio, plus (ftx > 1e-6 and C > 0) ftx · mean_desirable(−logp / tokens) · N / C as LLaMA-Factory
// adds it ("remember to rescale").
KtoTerms kto_example_terms(const KtoOptions& options, const KtoExample& example, double kl, const KtoBatchShape& shape);

// The means LLaMA-Factory logs (rewards and logps per desirable or undesirable example; kl and loss per batch,
// averaged over batches by their examples).
class KtoMetrics {
 public:
  void add(const KtoExample& example, const KtoTerms& terms, const KtoBatchShape& shape);
  void add_kl(double kl, const KtoBatchShape& shape);
  void merge(const KtoMetrics& other);
  // Its sums as numbers (to gather them over ranks) and back.
  std::vector<double> totals() const;
  static KtoMetrics from_totals(const double* totals);
  static constexpr size_t kTotals = 9;
  int64_t examples() const { return examples_; }
  int64_t desirable() const { return desirable_; }
  int64_t undesirable() const { return examples_ - desirable_; }
  double loss() const { return per_example(loss_); }
  double kl() const { return per_example(kl_); }
  double rewards_chosen() const { return desirable_ ? chosen_reward_ / static_cast<double>(desirable_) : 0.0; }
  double rewards_rejected() const {
    return undesirable() ? rejected_reward_ / static_cast<double>(undesirable()) : 0.0;
  }
  double logps_chosen() const { return desirable_ ? chosen_logp_ / static_cast<double>(desirable_) : 0.0; }
  double logps_rejected() const { return undesirable() ? rejected_logp_ / static_cast<double>(undesirable()) : 0.0; }
  double sft_loss() const { return desirable_ ? sft_loss_ / static_cast<double>(desirable_) : 0.0; }

 private:
  double per_example(double sum) const { return examples_ ? sum / static_cast<double>(examples_) : 0.0; }
  int64_t examples_ = 0, desirable_ = 0;
  double loss_ = 0.0, kl_ = 0.0, chosen_reward_ = 0.0, rejected_reward_ = 0.0, chosen_logp_ = 0.0,
         rejected_logp_ = 0.0, sft_loss_ = 0.0;
};

}  // namespace mt
