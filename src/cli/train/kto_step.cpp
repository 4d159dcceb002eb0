// KTO's step, scoring and metrics (see kto_step.h).
#include "cli/train/kto_step.h"

#include "core/error.h"
#include "data/batch_share.h"

namespace mt {
namespace {

KtoBatchShape shape_of(const Batch& batch) {
  KtoBatchShape shape{batch.num_seqs / 2, 0};
  for (const uint8_t d : batch.desirable) shape.desirable += d;
  return shape;
}

KtoExample example_of(const Batch& batch, const std::vector<int64_t>& tokens, int64_t i, double logp) {
  const auto k = static_cast<size_t>(i);
  return {logp, batch.reference_logps[k], tokens[k], batch.desirable[k] != 0};
}

// The completions of examples [first, first + count) of a KTO batch: each one's derivative of the batch loss; keeps
// the log-probabilities it was given, in order, for the metrics.
class KtoObjective final : public SequenceObjective {
 public:
  KtoObjective(const KtoOptions& options, const Batch& batch, int64_t first, double kl)
      : options_(options), batch_(batch), tokens_(target_counts(batch)), shape_(shape_of(batch)), first_(first),
        kl_(kl) {}
  int64_t group_size() const override { return 1; }
  void weigh(int64_t first_seq, const std::vector<double>& logps, std::vector<double>& d_logp) override {
    MT_ASSERT(static_cast<size_t>(first_seq) == logps_.size(), "passes are weighed in order");
    for (size_t i = 0; i < logps.size(); ++i) {
      const KtoExample e = example_of(batch_, tokens_, first_ + first_seq + static_cast<int64_t>(i), logps[i]);
      d_logp[i] = kto_example_terms(options_, e, kl_, shape_).d_logp;
    }
    logps_.insert(logps_.end(), logps.begin(), logps.end());
  }
  const std::vector<double>& logps() const { return logps_; }

 private:
  KtoOptions options_;
  const Batch& batch_;
  std::vector<int64_t> tokens_;
  KtoBatchShape shape_;
  int64_t first_;
  double kl_;
  std::vector<double> logps_;
};

std::vector<double> reference_kl(const Batch& batch) {
  const auto n = static_cast<std::ptrdiff_t>(batch.num_seqs / 2);
  return {batch.reference_logps.begin() + n, batch.reference_logps.end()};
}

}  // namespace

KtoOptions kto_options(const TrainingConfig& t) {
  return {t.pref_beta, t.kto_chosen_weight, t.kto_rejected_weight, t.pref_ftx};
}

KtoMetrics score_kto(const KtoOptions& options, const Batch& batch, const std::vector<double>& completion_logps,
                     const std::vector<double>& kl_logps) {
  const KtoBatchShape shape = shape_of(batch);
  MT_ASSERT(!batch.desirable.empty() && batch.reference_logps.size() == static_cast<size_t>(batch.num_seqs) &&
            completion_logps.size() == static_cast<size_t>(shape.examples) &&
            kl_logps.size() == completion_logps.size());
  const std::vector<int64_t> tokens = target_counts(batch);
  const double kl = kto_kl(kl_logps, reference_kl(batch));
  KtoMetrics metrics;
  metrics.add_kl(kl, shape);
  for (int64_t i = 0; i < shape.examples; ++i) {
    const KtoExample e = example_of(batch, tokens, i, completion_logps[static_cast<size_t>(i)]);
    metrics.add(e, kto_example_terms(options, e, kl, shape), shape);
  }
  return metrics;
}

KtoMetrics kto_evaluate(Engine& engine, const dist::DataParallel& dp, const Batch& batch, const KtoOptions& options) {
  const int64_t n = batch.num_seqs / 2;
  const ExampleShare share = example_share(n, std::max(dp.size, 1), std::max(dp.rank, 0), 0);
  std::vector<double> completions, kl;
  if (share.count > 0) {
    completions = engine.sequence_logps(batch_rows(batch, share.first, share.count));
    kl = engine.sequence_logps(batch_rows(batch, n + share.first, share.count));
  }
  return score_kto(options, batch, dist::all_gather(dp, completions), dist::all_gather(dp, kl));
}

KtoStepResult kto_forward_backward(Engine& engine, const dist::DataParallel& dp, const Batch& batch,
                                   const KtoOptions& options, int64_t passes) {
  const int64_t n = batch.num_seqs / 2;
  const ExampleShare share = example_share(n, std::max(dp.size, 1), std::max(dp.rank, 0), passes);
  // The KL estimate carries no gradient: the policy's KL sequences forward only, then the whole batch's on every rank.
  const std::vector<double> kl_logps =
      dist::all_gather(dp, engine.sequence_logps(batch_rows(batch, n + share.first, share.count)));
  const double kl = kto_kl(kl_logps, reference_kl(batch));
  KtoObjective objective(options, batch, share.first, kl);
  KtoStepResult result;
  result.loss = engine.forward_backward(batch_rows(batch, share.first, share.count), objective);
  result.metrics = score_kto(options, batch, dist::all_gather(dp, objective.logps()), kl_logps);
  return result;
}

std::vector<std::pair<std::string, double>> kto_metric_values(const KtoOptions& options, const KtoMetrics& m,
                                                              const std::string& prefix) {
  std::vector<std::pair<std::string, double>> v;
  if (m.desirable() > 0) {
    v.emplace_back(prefix + "rewards/chosen", m.rewards_chosen());
    v.emplace_back(prefix + "logps/chosen", m.logps_chosen());
  }
  if (m.undesirable() > 0) {
    v.emplace_back(prefix + "rewards/rejected", m.rewards_rejected());
    v.emplace_back(prefix + "logps/rejected", m.logps_rejected());
  }
  if (m.desirable() > 0 && m.undesirable() > 0)
    v.emplace_back(prefix + "rewards/margins", m.rewards_chosen() - m.rewards_rejected());
  v.emplace_back(prefix + "kl", m.kl());
  if (options.ftx > 1e-6 && m.desirable() > 0) v.emplace_back(prefix + "sft_loss", m.sft_loss());
  return v;
}

}  // namespace mt
