// KTO's training step and scoring (training.stage kto): the batch's KL estimate from a forward-only pass over its KL
// sequences, then one forward-backward over its completions with each example's derivative, and the metrics
// LLaMA-Factory's CustomKTOTrainer logs.
// Invariant: a batch (make_batch of N KTO examples with their reference log-probabilities) is scored the same on any
// number of data-parallel ranks: each rank runs its share's sequences, the log-probabilities are gathered in example
// order, and the KL estimate and every metric are computed from the whole batch's on every rank.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "data/batch.h"
#include "dist/data_parallel.h"
#include "engine/engine.h"
#include "engine/kto_loss.h"

namespace mt {

KtoOptions kto_options(const TrainingConfig& training);

// The metrics of a KTO batch from the policy's summed log-probabilities of its completions and KL sequences (each in
// example order), without a gradient: what a step logs and evaluation reports.
KtoMetrics score_kto(const KtoOptions& options, const Batch& batch, const std::vector<double>& completion_logps,
                     const std::vector<double>& kl_logps);

struct KtoStepResult {
  StepLoss loss;  // the completions' summed CE (this rank's share)
  KtoMetrics metrics;
};

// One step's gradients of the KTO loss of `batch` (its examples shared over dp's ranks, each share in `passes` or
// more whole examples), accumulated by the engine as SFT's are.
KtoStepResult kto_forward_backward(Engine& engine, const dist::DataParallel& dp, const Batch& batch,
                                   const KtoOptions& options, int64_t passes);

// The metrics of `batch` under the weights the store holds now, without a gradient (evaluation): its examples shared
// over dp's ranks, the log-probabilities gathered, the same on every rank. Collective over the compute ranks.
KtoMetrics kto_evaluate(Engine& engine, const dist::DataParallel& dp, const Batch& batch, const KtoOptions& options);

// The metrics as (name, value) in LLaMA-Factory's names with `prefix` ("" or "eval_"): rewards and logps of the
// desirable examples (where the batch has any) and the undesirable ones, their margin where it has both, kl, and
// sft_loss where pref_ftx adds it.
std::vector<std::pair<std::string, double>> kto_metric_values(const KtoOptions& options, const KtoMetrics& metrics,
                                                              const std::string& prefix);

}  // namespace mt
