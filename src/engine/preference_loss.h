// Pairwise preference losses over per-sequence log-probabilities, as LLaMA-Factory's CustomDPOTrainer computes them
// (TRL's dpo_loss for sigmoid, hinge and ipo; its own odds_ratio_loss and simpo_loss; pref_ftx's SFT term), with each
// pair's derivative with respect to its two summed log-probabilities, which the head's weighted backward consumes.
// Invariant: everything is fp64 on the host and depends only on the pair itself, so a global batch's loss (the mean
// over its pairs) is the sum of its pairs' terms over the pair count, whatever micro-batches hold them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mt {

enum class PreferenceLossType { sigmoid, hinge, ipo, orpo, simpo };

// training.pref_loss's name -> type; an unknown name throws mt::Error listing the accepted names.
PreferenceLossType preference_loss_type(const std::string& name);
// ipo, orpo and simpo see each sequence's log-probability averaged over its response tokens; sigmoid and hinge the sum.
bool averages_logps(PreferenceLossType type);
// sigmoid, hinge and ipo compare with a reference model's log-probabilities; orpo and simpo need none.
bool uses_reference(PreferenceLossType type);

struct PreferenceOptions {
  PreferenceLossType type = PreferenceLossType::sigmoid;
  double beta = 0.1;             // pref_beta
  double ftx = 0.0;              // pref_ftx: + ftx · (−chosen log-probability per response token)
  double label_smoothing = 0.0;  // dpo_label_smoothing (sigmoid only: cDPO)
  double simpo_gamma = 0.5;      // simpo_gamma
};

// One sequence of a pair: its response's summed log-probability and its response tokens (labels != −100).
struct SequenceLogp {
  double logp = 0.0;
  int64_t tokens = 0;
};

struct PairTerms {
  double loss = 0.0;                 // the pair's loss (ftx term included)
  double d_chosen = 0.0;             // ∂loss/∂(chosen's summed log-probability)
  double d_rejected = 0.0;           // ∂loss/∂(rejected's summed log-probability)
  double chosen_reward = 0.0;        // rewards/chosen: β·(logp − reference logp), β·logp without a reference
  double rejected_reward = 0.0;
  double chosen_logp = 0.0;          // logps/chosen: summed, or averaged where the loss averages
  double rejected_logp = 0.0;
  double sft_loss = 0.0;             // −chosen log-probability per response token
  double odds_ratio_loss = 0.0;      // orpo: −log σ(log odds ratio)
};

// The terms of one pair; `reference_*` are read only where uses_reference(type) (summed, as the policy's).
PairTerms preference_pair_terms(const PreferenceOptions& options, const SequenceLogp& chosen,
                                const SequenceLogp& rejected, const SequenceLogp& reference_chosen,
                                const SequenceLogp& reference_rejected);

// The means LLaMA-Factory logs over a batch's pairs (rewards/accuracies counts chosen_reward > rejected_reward).
class PreferenceMetrics {
 public:
  void add(const PairTerms& pair);
  void merge(const PreferenceMetrics& other);
  // Its sums as numbers (to gather them over ranks) and back.
  std::vector<double> totals() const;
  static PreferenceMetrics from_totals(const double* totals);
  static constexpr size_t kTotals = 9;
  int64_t pairs() const { return pairs_; }
  double loss() const { return mean(loss_); }
  double rewards_chosen() const { return mean(chosen_reward_); }
  double rewards_rejected() const { return mean(rejected_reward_); }
  double rewards_accuracies() const { return mean(accurate_); }
  double rewards_margins() const { return mean(chosen_reward_ - rejected_reward_); }
  double logps_chosen() const { return mean(chosen_logp_); }
  double logps_rejected() const { return mean(rejected_logp_); }
  double sft_loss() const { return mean(sft_loss_); }
  double odds_ratio_loss() const { return mean(odds_ratio_loss_); }

 private:
  double mean(double sum) const { return pairs_ > 0 ? sum / static_cast<double>(pairs_) : 0.0; }
  int64_t pairs_ = 0;
  double loss_ = 0.0, chosen_reward_ = 0.0, rejected_reward_ = 0.0, accurate_ = 0.0, chosen_logp_ = 0.0,
         rejected_logp_ = 0.0, sft_loss_ = 0.0, odds_ratio_loss_ = 0.0;
};

}  // namespace mt
