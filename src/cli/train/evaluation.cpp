// Evaluation (see evaluation.h).
#include "cli/train/evaluation.h"

#include <algorithm>
#include <chrono>

#include "cli/train/kto_step.h"
#include "cli/train/preference_run.h"
#include "core/error.h"

namespace mt {

Evaluation::Evaluation(std::vector<Example> examples, int64_t eval_steps, int64_t last_step, int64_t batch_size,
                       const dist::DataParallel& dp, std::function<void(int64_t)> weights_ready,
                       std::optional<PreferenceOptions> preference, std::optional<KtoOptions> kto)
    : examples_(static_cast<int64_t>(examples.size())), eval_steps_(eval_steps), last_step_(last_step), dp_(dp),
      weights_ready_(std::move(weights_ready)), preference_(preference), kto_(kto) {
  MT_REQUIRE((!preference_ && !kto_) || dp.size <= 1, "preference evaluation runs on one GPU rank");
  const int64_t ranks = std::max(dp.size, 1);
  const int64_t per_batch = std::max<int64_t>(1, batch_size / ranks);
  for (int64_t first = 0, k = 0; first < examples_; first += per_batch, ++k) {
    if (k % ranks != std::max(dp.rank, 0)) continue;
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
    if (kto_) {  // completions, then KL sequences
      const std::vector<double> logps = engine.sequence_logps(b);
      const auto n = static_cast<std::ptrdiff_t>(batch.size());
      kto.merge(score_kto(*kto_, b, {logps.begin(), logps.begin() + n}, {logps.begin() + n, logps.end()}));
      sums[1] += static_cast<double>(b.num_target_tokens);
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
  if (dp_.size > 1) dist::all_reduce_sum(dp_, sums, 2);
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
