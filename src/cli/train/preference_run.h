// Preference training's parts of a run (training.stage dpo, kto): the reference pass before step 1, and each DPO
// step's objective with the metrics LLaMA-Factory logs (KTO's: kto_step.h).
// Invariant: every example's two reference log-probabilities (a pair's chosen and rejected; a KTO example's
// completion and KL sequence) come from the weights the run starts from (or training.ref_model), by
// Engine::sequence_logps in batches of training.batch_size examples in load order; they are written to
// <output_dir>/reference_logps.json once and read back, never recomputed, by a resumed run.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "data/batch.h"
#include "dist/data_parallel.h"
#include "engine/engine.h"
#include "engine/preference_loss.h"

namespace mt {

PreferenceOptions preference_options(const TrainingConfig& training);

// The reference pass itself: each example's two log-probabilities under the weights the store holds now (a pair's
// chosen and rejected; a KTO example's completion and KL sequence), by Engine::sequence_logps in batches of
// `batch_examples` examples in order, each batch shared over dp's compute ranks as a training batch is and gathered
// on every rank; attached to each example (Example::reference_logps) and returned in order, two per example. What
// attach_reference_logps and `bench --stage dpo|kto` run. Collective over dp's compute ranks.
std::vector<double> reference_pass(Engine& engine, std::vector<Example>& examples, int64_t batch_examples,
                                   const dist::DataParallel& dp);

// The reference log-probabilities of the training and evaluation examples, attached to each (Example::
// reference_logps). A `resumed` run reads them from <output_dir>/reference_logps.json (an error where it is missing
// or was written for other pairs: the weights have moved); a fresh one computes them with `engine` and the weights
// its store holds between `load_reference_weights` and `restore_weights` (training.ref_model; unset: the store's
// own) and writes that file. Under data parallelism each batch is shared over the compute ranks as a training batch
// is, and every rank gets all of them; compute rank 0 logs and writes the file. Collective over dp's compute ranks. Logged with its own
// progress line and time. Nothing happens for dpo's orpo and simpo.
void attach_reference_logps(const Config& config, Engine& engine, std::vector<Example>& train,
                            std::vector<Example>& eval, bool resumed, const dist::DataParallel& dp,
                            const std::function<void()>& load_reference_weights = {},
                            const std::function<void()>& restore_weights = {});

// A batch of pairs' objective: each pair's loss (mean over `loss_pairs` pairs: the global batch's, of which `batch`
// may be a share; 0: the batch's own), its derivative per sequence, and the metrics, as LLaMA-Factory's
// CustomDPOTrainer computes them; keeps the log-probabilities it was given, in order.
class PreferenceObjective final : public SequenceObjective {
 public:
  PreferenceObjective(const PreferenceOptions& options, const Batch& batch, int64_t loss_pairs = 0);
  int64_t group_size() const override { return 2; }
  void weigh(int64_t first_seq, const std::vector<double>& logps, std::vector<double>& d_logp) override;
  const PreferenceMetrics& metrics() const { return metrics_; }
  const std::vector<double>& logps() const { return logps_; }

 private:
  PreferenceOptions options_;
  const Batch& batch_;
  double loss_pairs_;
  std::vector<int64_t> response_tokens_;  // per sequence: its targets (labels != −100 after the shift)
  PreferenceMetrics metrics_;
  std::vector<double> logps_;
};

struct PreferenceStepResult {
  StepLoss loss;  // the sequences' summed CE (this rank's share)
  PreferenceMetrics metrics;  // the whole batch's
};

// One step's gradients of the pair loss of `batch` (its pairs shared over dp's ranks, each share in `passes` or more
// whole pairs, each pair's terms over the global pair count), accumulated by the engine as SFT's are; the metrics
// from every rank's log-probabilities gathered in pair order, the same on every rank.
PreferenceStepResult preference_forward_backward(Engine& engine, const dist::DataParallel& dp, const Batch& batch,
                                                 const PreferenceOptions& options, int64_t passes);

// The metrics as (name, value) in LLaMA-Factory's names with `prefix` ("" or "eval_"); sft_loss where pref_ftx or
// orpo adds it, odds_ratio_loss for orpo.
std::vector<std::pair<std::string, double>> preference_metric_values(const PreferenceOptions& options,
                                                                     const PreferenceMetrics& metrics,
                                                                     const std::string& prefix);

// The pairs of `batch` (a make_batch of pairs with their reference log-probabilities) scored by `logps` (the
// policy's, one per sequence) without a gradient: what evaluation reports.
PreferenceMetrics score_pairs(const PreferenceOptions& options, const Batch& batch, const std::vector<double>& logps);

}  // namespace mt
