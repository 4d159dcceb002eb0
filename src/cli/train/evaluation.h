// Evaluation during training: the held-out examples' mean cross-entropy (Σ CE over every target token of the set /
// their count) under the weights after a step, by a forward-only pass through the same streaming engine
// (Engine::forward_loss: no gradient, no optimizer, no gradient D2H), after every training.eval_steps-th step and
// after the last.
// Invariant: every compute rank calls after_step with the same steps; each evaluates its own batches of the set
// (batch k on data-parallel rank k mod ranks) of at most its share of a training batch, so activations fit the
// training plan (KTO: every rank takes every batch of a whole training batch, shared over the ranks as in training,
// each with its own KL estimate); the loss and a preference stage's metrics are summed over the ranks and are the
// same whatever their number (up to summation order).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/batch.h"
#include "dist/data_parallel.h"
#include "engine/engine.h"
#include "engine/kto_loss.h"
#include "engine/preference_loss.h"

namespace mt {

struct EvalResult {
  int64_t step = 0;
  double loss = 0.0;          // mean CE over the set's target tokens
  int64_t target_tokens = 0;
  int64_t examples = 0;
  double seconds = 0.0;
  std::vector<std::pair<std::string, double>> extra = {};  // preference pairs: eval_rewards/..., logged by name
};

class Evaluation {
 public:
  // batch_size: training.batch_size (global); `weights_ready(step)` makes the store's reads wait for the weights
  // after `step`'s update (the optimizer's version on ranks that do not submit updates themselves).
  // preference: the examples are pairs with their reference log-probabilities, scored by this loss (loss = the
  // mean pair loss; extra = LLaMA-Factory's eval_ metrics) instead of the mean CE. kto: KTO examples likewise, each
  // evaluation batch with its own KL estimate.
  Evaluation(std::vector<Example> examples, int64_t eval_steps, int64_t last_step, int64_t batch_size,
             const dist::DataParallel& dp, std::function<void(int64_t)> weights_ready,
             std::optional<PreferenceOptions> preference = std::nullopt, std::optional<KtoOptions> kto = std::nullopt);
  bool enabled() const { return !batches_.empty(); }
  bool due(int64_t step) const;
  // The evaluation after `step` when it is due (or forced), else nullopt.
  std::optional<EvalResult> after_step(Engine& engine, int64_t step, bool force = false);

 private:
  std::vector<std::vector<Example>> batches_;  // this rank's batches
  int64_t examples_ = 0;
  int64_t eval_steps_, last_step_;
  const dist::DataParallel& dp_;
  std::function<void(int64_t)> weights_ready_;
  std::optional<PreferenceOptions> preference_;
  std::optional<KtoOptions> kto_;
};

}  // namespace mt
