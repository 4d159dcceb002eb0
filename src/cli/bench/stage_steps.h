// bench --stage: each step's batch of random examples laid out as `train` lays out its stage's, the reference pass
// over them, and a step's forward-backward through the calls `train` makes (cli/train/preference_run.h, kto_step.h).
// Invariant: an sft batch holds --batch sequences of --seq random tokens, every label trained (packed where --pack
// asks); a dpo batch --batch pairs, each a random prompt of seq / 2 tokens shared by a random chosen and rejected
// response of the rest, labels on the responses only (2 × batch × seq tokens); a kto batch --batch examples (a random
// prompt and response as a pair's chosen, every other one desirable) and their KL sequences, each the prompt with the
// previous example's response, the first taking the last's, as LLaMA-Factory's FeedbackDatasetProcessor shifts a
// block (2 × batch × seq tokens). Where the stage has a reference (dpo with sigmoid, hinge or ipo; kto), every batch
// carries the reference log-probabilities of the weights the run starts from once reference_pass has run.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cli/bench/bench.h"
#include "data/batch.h"
#include "dist/data_parallel.h"
#include "engine/engine.h"
#include "engine/kto_loss.h"
#include "engine/preference_loss.h"

namespace mt {

enum class BenchStage { sft, dpo, kto };

struct ReferenceTiming {
  double seconds = 0;  // 0: the stage has no reference pass
  int64_t tokens = 0;  // every sequence of every example
};

struct StageStepLoss {
  StepLoss engine;   // the sequences' summed CE (this rank's share)
  double objective;  // the step's loss as train logs it: the CE mean (sft), the pair or KTO loss
};

class StageSteps {
 public:
  // `steps` batches for a model of `vocab` tokens, the step's seed its number (1, 2, ...).
  StageSteps(const BenchOptions& options, int64_t vocab, int64_t steps);
  BenchStage stage() const { return stage_; }
  // Sequences of an example that run forward and backward (the memory plan counts them): a pair's two, else one.
  int64_t sequences_per_example() const { return stage_ == BenchStage::dpo ? 2 : 1; }
  bool has_reference() const;
  // The reference pass over every step's examples with the weights the store holds now, timed; nothing where the
  // stage has none. Collective over dp's compute ranks.
  ReferenceTiming reference_pass(Engine& engine, const dist::DataParallel& dp);
  const Batch& batch(int64_t step) const { return batches_[static_cast<size_t>(step - 1)]; }
  // Tokens of step's batch that run forward only (a KTO batch's KL sequences; 0 otherwise).
  int64_t forward_only_tokens(int64_t step) const;
  // Step `step`'s gradients, as train's step at this stage (in `passes` passes, shared over dp's ranks).
  StageStepLoss forward_backward(Engine& engine, const dist::DataParallel& dp, int64_t step, int64_t passes) const;

 private:
  BenchStage stage_;
  int64_t batch_size_;
  PreferenceOptions preference_;
  KtoOptions kto_;
  std::vector<std::vector<Example>> examples_;  // dpo, kto: each step's pairs or examples
  std::vector<Batch> batches_;
};

}  // namespace mt
