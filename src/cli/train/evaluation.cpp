// Evaluation (see evaluation.h).
#include "cli/train/evaluation.h"

#include <algorithm>
#include <chrono>

#include "cli/train/kto_step.h"
#include "cli/train/preference_run.h"
#include "core/error.h"

namespace mt {
namespace {

// The metrics whose totals lie end to end in `all` (each rank's, in rank order), merged.
template <typename Metrics>
Metrics merged(const std::vector<double>& all) {
  Metrics m;
  for (size_t at = 0; at < all.size(); at += Metrics::kTotals) m.merge(Metrics::from_totals(all.data() + at));
  return m;
}

}  // namespace

Evaluation::Evaluation(std::vector<Example> examples, int64_t eval_steps, int64_t last_step, int64_t batch_size,
                       const dist::DataParallel& dp, std::function<void(int64_t)> weights_ready,
                       std::optional<PreferenceOptions> preference, std::optional<KtoOptions> kto)
    : examples_(static_cast<int64_t>(examples.size())), eval_steps_(eval_steps), last_step_(last_step), dp_(dp),
      weights_ready_(std::move(weights_ready)), preference_(preference), kto_(kto) {
  const int64_t ranks = std::max(dp.size, 1);
  // KTO's batches are whole training batches on every rank, each shared over the ranks (kto_evaluate): each has
  // its own KL estimate, the same whatever the ranks.
  const int64_t per_batch = kto_ ? batch_size : std::max<int64_t>(1, batch_size / ranks);
  for (int64_t first = 0, k = 0; first < examples_; first += per_batch, ++k) {
    if (!kto_ && k % ranks != std::max(dp.rank, 0)) continue;
    const auto begin = examples.begin() + first, end = examples.begin() + std::min(first + per_batch, examples_);
    batches_.emplace_back(std::make_move_iterator(begin), std::make_move_iterator(end));
  }
  if (examples_ > 0 && batches_.empty()) batches_.emplace_back();  // a rank with no batch still joins the sums
}

bool Evaluation::due(int64_t step) const {
  return enabled() && (step == last_step_ || (eval_steps_ > 0 && step % eval_steps_ == 0));
}

std::optional<EvalResult> Evaluation::after_step(Engine& engine, int64_t step, bool force) {
  if (!enabled() || !(force || due(step))) return std::nullopt;
  const auto t0 = std::chrono::steady_clock::now();
  weights_ready_(step);
  double sums[2] = {0.0, 0.0};  // Σ CE, target tokens
  PreferenceMetrics pairs;
  KtoMetrics kto;
  for (const std::vector<Example>& batch : batches_) {
    if (batch.empty()) continue;
    const Batch b = make_batch(batch);
    if (kto_) {  // every rank scores the whole batch: its target tokens are counted once
      kto.merge(kto_evaluate(engine, dp_, b, *kto_));
      if (dp_.rank <= 0) sums[1] += static_cast<double>(batch_rows(b, 0, b.num_seqs / 2).num_target_tokens);
      continue;
    }
    if (preference_) {
      pairs.merge(score_pairs(*preference_, b, engine.sequence_logps(b)));
      sums[1] += static_cast<double>(b.num_target_tokens);
      continue;
    }
    const StepLoss loss = engine.forward_loss(b);
    sums[0] += loss.loss_sum;
    sums[1] += static_cast<double>(loss.target_tokens);
  }
  if (dp_.size > 1) {
    dist::all_reduce_sum(dp_, sums, 2);
    // Every rank's metrics, merged in rank order.
    if (preference_) pairs = merged<PreferenceMetrics>(dist::all_gather(dp_, pairs.totals()));
  }
  MT_REQUIRE(sums[1] > 0, "the evaluation set has no target tokens (every label is -100)");
  EvalResult r;
  r.step = step;
  r.loss = kto_ ? kto.loss() : preference_ ? pairs.loss() : sums[0] / sums[1];
  if (preference_) r.extra = preference_metric_values(*preference_, pairs, "eval_");
  if (kto_) r.extra = kto_metric_values(*kto_, kto, "eval_");
  r.target_tokens = static_cast<int64_t>(sums[1]);
  r.examples = examples_;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace mt
