// The bench's batches and steps at each training stage (see stage_steps.h).
#include "cli/bench/stage_steps.h"

#include <chrono>
#include <cstdio>
#include <random>

#include "cli/runtime/data_parallel_step.h"
#include "cli/train/kto_step.h"
#include "cli/train/preference_run.h"
#include "config/config.h"
#include "core/error.h"

namespace mt {
namespace {

BenchStage stage_from_name(const std::string& name) {
  if (name == "dpo") return BenchStage::dpo;
  if (name == "kto") return BenchStage::kto;
  MT_REQUIRE(name == "sft", "bench: --stage must be sft, dpo or kto, not '{}'", name);
  return BenchStage::sft;
}

// --pack: the example lengths [lo, hi], or {0, 0} where unset; one error line naming the flag if malformed.
struct PackLengths {
  int64_t lo = 0, hi = 0;
};
PackLengths pack_lengths(const std::string& text) {
  if (text.empty()) return {};
  long long lo = 0, hi = 0;
  char tail = 0;
  MT_REQUIRE(std::sscanf(text.c_str(), "%lld-%lld%c", &lo, &hi, &tail) == 2 && lo >= 1 && lo <= hi,
             "--pack must be LO-HI with 1 <= LO <= HI (example lengths in tokens), not '{}'", text);
  return {lo, hi};
}

class RandomTokens {
 public:
  RandomTokens(int64_t vocab, uint64_t seed) : vocab_(static_cast<uint64_t>(vocab)), rng_(seed) {}
  std::vector<int32_t> take(int64_t n) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (auto& id : ids) id = static_cast<int32_t>(rng_() % vocab_);
    return ids;
  }
  uint64_t next() { return rng_(); }

 private:
  uint64_t vocab_;
  std::mt19937_64 rng_;
};

std::vector<Example> random_sequences(int64_t batch, int64_t seq, PackLengths pack, RandomTokens& tokens) {
  std::vector<Example> ex(static_cast<size_t>(batch));
  for (auto& e : ex) {
    e.input_ids = tokens.take(seq);
    e.labels = e.input_ids;
    for (int64_t left = pack.lo > 0 ? seq : 0; left > 0;) {
      const int64_t len = std::min<int64_t>(
          left, pack.lo + static_cast<int64_t>(tokens.next() % static_cast<uint64_t>(pack.hi - pack.lo + 1)));
      e.pieces.push_back(static_cast<int32_t>(len));
      left -= len;
    }
  }
  return ex;
}

// prompt then response, the labels on the response only.
void assemble(const std::vector<int32_t>& prompt, const std::vector<int32_t>& response, std::vector<int32_t>& ids,
              std::vector<int32_t>& labels) {
  ids = prompt;
  ids.insert(ids.end(), response.begin(), response.end());
  labels.assign(prompt.size(), kIgnoreIndex);
  labels.insert(labels.end(), response.begin(), response.end());
}

std::vector<Example> random_pairs(int64_t pairs, int64_t seq, RandomTokens& tokens) {
  const int64_t prompt_len = seq / 2;
  std::vector<Example> ex(static_cast<size_t>(pairs));
  for (auto& e : ex) {
    const std::vector<int32_t> prompt = tokens.take(prompt_len);
    assemble(prompt, tokens.take(seq - prompt_len), e.input_ids, e.labels);
    assemble(prompt, tokens.take(seq - prompt_len), e.rejected_ids, e.rejected_labels);
  }
  return ex;
}

std::vector<Example> random_kto_examples(int64_t count, int64_t seq, RandomTokens& tokens) {
  const int64_t prompt_len = seq / 2;
  std::vector<std::vector<int32_t>> prompts, responses;
  for (int64_t i = 0; i < count; ++i) {
    prompts.push_back(tokens.take(prompt_len));
    responses.push_back(tokens.take(seq - prompt_len));
  }
  std::vector<Example> ex(static_cast<size_t>(count));
  for (size_t i = 0; i < ex.size(); ++i) {
    assemble(prompts[i], responses[i], ex[i].input_ids, ex[i].labels);
    assemble(prompts[i], responses[(i + ex.size() - 1) % ex.size()], ex[i].kl_ids, ex[i].kl_labels);
    ex[i].desirable = i % 2 == 0;
  }
  return ex;
}

}  // namespace

StageSteps::StageSteps(const BenchOptions& o, int64_t vocab, int64_t steps)
    : stage_(stage_from_name(o.stage)), batch_size_(o.batch) {
  TrainingConfig training;  // train's defaults for the loss (pref_beta 0.1, ...)
  training.pref_loss = o.pref_loss;
  preference_ = preference_options(training);
  kto_ = kto_options(training);
  const PackLengths pack = pack_lengths(o.pack);
  MT_REQUIRE(stage_ == BenchStage::sft || pack.lo == 0, "bench: --pack {} is for --stage sft (train refuses packing "
             "for {})", o.pack, o.stage);
  MT_REQUIRE(stage_ == BenchStage::dpo || o.pref_loss == "sigmoid", "bench: --pref-loss {} is for --stage dpo",
             o.pref_loss);
  MT_REQUIRE(stage_ == BenchStage::sft || o.seq >= 2, "bench: --stage {} needs --seq 2 or more (a prompt and a "
             "response), not {}", o.stage, o.seq);
  for (int64_t step = 1; step <= steps; ++step) {
    RandomTokens tokens(vocab, static_cast<uint64_t>(step));
    if (stage_ == BenchStage::sft)
      batches_.push_back(make_batch(random_sequences(o.batch, o.seq, pack, tokens)));
    else
      examples_.push_back(stage_ == BenchStage::dpo ? random_pairs(o.batch, o.seq, tokens)
                                                    : random_kto_examples(o.batch, o.seq, tokens));
  }
  if (!has_reference())
    for (const auto& ex : examples_) batches_.push_back(make_batch(ex));
}

bool StageSteps::has_reference() const {
  return stage_ == BenchStage::kto || (stage_ == BenchStage::dpo && uses_reference(preference_.type));
}

ReferenceTiming StageSteps::reference_pass(Engine& engine, const dist::DataParallel& dp) {
  if (!has_reference()) return {};
  std::vector<Example> all;
  for (const auto& ex : examples_) all.insert(all.end(), ex.begin(), ex.end());
  const auto t0 = std::chrono::steady_clock::now();
  mt::reference_pass(engine, all, batch_size_, dp);  // in batches of a step's examples, as train
  ReferenceTiming timing;
  timing.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t s = 0, at = 0; s < examples_.size(); ++s) {
    for (Example& e : examples_[s]) e.reference_logps = all[at++].reference_logps;
    batches_.push_back(make_batch(examples_[s]));
    timing.tokens += batches_.back().num_tokens;
  }
  return timing;
}

int64_t StageSteps::forward_only_tokens(int64_t step) const {
  if (stage_ != BenchStage::kto) return 0;
  const Batch& b = batch(step);
  const int64_t examples = b.num_seqs / 2;
  int64_t tokens = 0;
  for (int64_t s = examples; s < b.num_seqs; ++s) tokens += b.seq_lens[static_cast<size_t>(s)];
  return tokens;
}

StageStepLoss StageSteps::forward_backward(Engine& engine, const dist::DataParallel& dp, int64_t step,
                                           int64_t passes) const {
  const Batch& b = batch(step);
  if (stage_ == BenchStage::dpo) {
    const PreferenceStepResult r = preference_forward_backward(engine, dp, b, preference_, passes);
    return {r.loss, r.metrics.loss()};
  }
  if (stage_ == BenchStage::kto) {
    const KtoStepResult r = kto_forward_backward(engine, dp, b, kto_, passes);
    return {r.loss, r.metrics.loss()};
  }
  const StepLoss loss = forward_backward_share(engine, dp, b, passes);
  return {loss, loss.mean()};
}

}  // namespace mt
