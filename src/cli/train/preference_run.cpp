// Preference training's reference pass, objective and metrics (see preference_run.h).
#include "cli/train/preference_run.h"

#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "data/batch_share.h"

namespace mt {
namespace {

const char* kReferenceFile = "reference_logps.json";

// FNV-1a over every token and label (and KTO tag) of the examples, in order: which examples a reference file
// belongs to.
std::string pairs_fingerprint(const std::vector<Example>& pairs) {
  uint64_t h = 1469598103934665603ull;
  const auto mix = [&](const std::vector<int32_t>& v) {
    for (const int32_t x : v) {
      h ^= static_cast<uint32_t>(x);
      h *= 1099511628211ull;
    }
    h ^= 0xffu;  // a separator: [1 2][3] and [1][2 3] differ
    h *= 1099511628211ull;
  };
  for (const Example& e : pairs) {
    mix(e.input_ids);
    mix(e.labels);
    mix(e.rejected_ids);
    mix(e.rejected_labels);
    if (!e.is_kto()) continue;  // a DPO file's print is what it was before KTO
    mix(e.kl_ids);
    mix(e.kl_labels);
    mix({e.desirable ? 1 : 0});
  }
  return fmt::format("{:016x}", h);
}

int64_t tokens_of(const std::vector<Example>& examples) {
  int64_t n = 0;
  for (const Example& e : examples)
    n += static_cast<int64_t>(e.input_ids.size() + e.rejected_ids.size() + e.kl_ids.size());
  return n;
}

void attach(std::vector<Example>& examples, const std::vector<double>& logps) {
  MT_ASSERT(logps.size() == 2 * examples.size());
  for (size_t i = 0; i < examples.size(); ++i) examples[i].reference_logps = {logps[2 * i], logps[2 * i + 1]};
}

}  // namespace

std::vector<double> reference_pass(Engine& engine, std::vector<Example>& examples, int64_t batch_examples,
                                   const dist::DataParallel& dp) {
  const auto n = static_cast<int64_t>(examples.size());
  const int ranks = std::max(dp.size, 1);
  std::vector<double> mine;
  for (int64_t first = 0; first < n; first += batch_examples) {
    const ExampleShare share = example_share(std::min(batch_examples, n - first), ranks, std::max(dp.rank, 0), 0);
    if (share.count == 0) continue;
    const auto begin = examples.begin() + static_cast<std::ptrdiff_t>(first + share.first);
    const std::vector<double> part =
        engine.sequence_logps(make_batch({begin, begin + static_cast<std::ptrdiff_t>(share.count)}));
    const auto count = static_cast<size_t>(share.count);
    for (size_t i = 0; i < count; ++i) {  // a KTO batch holds the completions, then the KL sequences
      const bool kto = begin->is_kto();
      mine.push_back(part[kto ? i : 2 * i]);
      mine.push_back(part[kto ? count + i : 2 * i + 1]);
    }
  }
  const std::vector<double> gathered = dist::all_gather(dp, mine);
  std::vector<double> logps(2 * examples.size());
  size_t at = 0;  // the gathered values: rank 0's shares of every batch in order, then rank 1's, ...
  for (int r = 0; r < ranks; ++r)
    for (int64_t first = 0; first < n; first += batch_examples) {
      const ExampleShare share = example_share(std::min(batch_examples, n - first), ranks, r, 0);
      const auto values = static_cast<size_t>(2 * share.count);
      std::copy_n(gathered.begin() + static_cast<std::ptrdiff_t>(at), values,
                  logps.begin() + static_cast<std::ptrdiff_t>(2 * (first + share.first)));
      at += values;
    }
  MT_ASSERT(at == gathered.size());
  attach(examples, logps);
  return logps;
}

PreferenceOptions preference_options(const TrainingConfig& t) {
  PreferenceOptions o;
  o.type = preference_loss_type(t.pref_loss);
  o.beta = t.pref_beta;
  o.ftx = t.pref_ftx;
  o.label_smoothing = t.dpo_label_smoothing;
  o.simpo_gamma = t.simpo_gamma;
  return o;
}

void attach_reference_logps(const Config& config, Engine& engine, std::vector<Example>& train,
                            std::vector<Example>& eval, bool resumed, const dist::DataParallel& dp,
                            const std::function<void()>& load_reference_weights,
                            const std::function<void()>& restore_weights) {
  if (config.training.stage != "kto" && !uses_reference(preference_options(config.training).type)) {
    log::info("pref_loss {}: no reference model, no reference pass", config.training.pref_loss);
    return;
  }
  const std::filesystem::path file = std::filesystem::path(config.training.output_dir) / kReferenceFile;
  const std::string train_print = pairs_fingerprint(train), eval_print = pairs_fingerprint(eval);
  if (resumed) {  // the store holds trained weights now: the reference can only come from the file
    MT_REQUIRE(std::filesystem::is_regular_file(file), "{}: not found; a resumed run cannot recompute the reference "
               "log-probabilities (its weights are no longer the starting ones)", file.string());
    std::ifstream in(file);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    const bool ours = j.is_object() && j.value("train_pairs", "") == train_print &&
                      j.value("eval_pairs", "") == eval_print && j.contains("train") &&
                      j["train"].size() == 2 * train.size() && j.contains("eval") && j["eval"].size() == 2 * eval.size();
    MT_REQUIRE(ours, "{}: holds no reference log-probabilities of these examples, and a resumed run cannot recompute "
               "them (its weights are no longer the starting ones)", file.string());
    attach(train, j["train"].get<std::vector<double>>());
    attach(eval, j["eval"].get<std::vector<double>>());
    log::info("reference log-probabilities of {} training and {} evaluation examples read from {} (not recomputed)",
              train.size(), eval.size(), file.string());
    return;
  }
  if (load_reference_weights) load_reference_weights();
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<double> train_logps = reference_pass(engine, train, config.training.batch_size, dp);
  const std::vector<double> eval_logps = reference_pass(engine, eval, config.training.batch_size, dp);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (restore_weights) restore_weights();
  if (dp.rank > 0) return;  // compute rank 0 logs and writes
  const int64_t tokens = tokens_of(train) + tokens_of(eval);
  log::info("reference pass ({}): {} training and {} evaluation {}, {} tokens in {:.3f} s ({:.0f} tokens/s{})",
            config.training.ref_model.empty() ? "the starting weights" : config.training.ref_model, train.size(),
            eval.size(), config.training.stage == "kto" ? "examples" : "pairs", tokens, seconds,
            static_cast<double>(tokens) / std::max(seconds, 1e-9),
            dp.size > 1 ? fmt::format(", each batch shared over {} GPU ranks", dp.size) : std::string());
  std::filesystem::create_directories(file.parent_path());
  const nlohmann::json j = {{"train_pairs", train_print}, {"eval_pairs", eval_print}, {"train", train_logps},
                            {"eval", eval_logps}};
  const std::filesystem::path tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << j.dump() << "\n";
    MT_REQUIRE(out.good(), "{}: cannot write", tmp.string());
  }
  std::filesystem::rename(tmp, file);
}

PreferenceObjective::PreferenceObjective(const PreferenceOptions& options, const Batch& batch, int64_t loss_pairs)
    : options_(options),
      batch_(batch),
      loss_pairs_(static_cast<double>(loss_pairs > 0 ? loss_pairs : batch.num_seqs / 2)),
      response_tokens_(target_counts(batch)) {
  MT_ASSERT(batch.num_seqs % 2 == 0);
  MT_ASSERT(!uses_reference(options.type) || batch.reference_logps.size() == static_cast<size_t>(batch.num_seqs));
}

void PreferenceObjective::weigh(int64_t first_seq, const std::vector<double>& logps, std::vector<double>& d_logp) {
  MT_ASSERT(first_seq % 2 == 0 && logps.size() % 2 == 0 && static_cast<size_t>(first_seq) == logps_.size());
  logps_.insert(logps_.end(), logps.begin(), logps.end());
  const double pairs = loss_pairs_;
  const bool referenced = uses_reference(options_.type);
  for (size_t i = 0; i < logps.size(); i += 2) {
    const auto s = static_cast<size_t>(first_seq) + i;
    const SequenceLogp chosen{logps[i], response_tokens_[s]}, rejected{logps[i + 1], response_tokens_[s + 1]};
    const SequenceLogp ref_chosen{referenced ? batch_.reference_logps[s] : 0.0, response_tokens_[s]};
    const SequenceLogp ref_rejected{referenced ? batch_.reference_logps[s + 1] : 0.0, response_tokens_[s + 1]};
    const PairTerms terms = preference_pair_terms(options_, chosen, rejected, ref_chosen, ref_rejected);
    d_logp[i] = terms.d_chosen / pairs;
    d_logp[i + 1] = terms.d_rejected / pairs;
    metrics_.add(terms);
  }
}

PreferenceStepResult preference_forward_backward(Engine& engine, const dist::DataParallel& dp, const Batch& batch,
                                                 const PreferenceOptions& options, int64_t passes) {
  const int64_t pairs = batch.num_seqs / 2;
  const ExampleShare share = example_share(pairs, std::max(dp.size, 1), std::max(dp.rank, 0), passes);
  const Batch mine = batch_rows(batch, 2 * share.first, 2 * share.count);
  PreferenceObjective objective(options, mine, pairs);
  PreferenceStepResult result;
  result.loss = engine.forward_backward(mine, objective);
  result.metrics = score_pairs(options, batch, dist::all_gather(dp, objective.logps()));
  return result;
}

std::vector<std::pair<std::string, double>> preference_metric_values(const PreferenceOptions& options,
                                                                     const PreferenceMetrics& m,
                                                                     const std::string& prefix) {
  std::vector<std::pair<std::string, double>> v = {{prefix + "rewards/chosen", m.rewards_chosen()},
                                                   {prefix + "rewards/rejected", m.rewards_rejected()},
                                                   {prefix + "rewards/accuracies", m.rewards_accuracies()},
                                                   {prefix + "rewards/margins", m.rewards_margins()},
                                                   {prefix + "logps/chosen", m.logps_chosen()},
                                                   {prefix + "logps/rejected", m.logps_rejected()}};
  const bool orpo = options.type == PreferenceLossType::orpo;
  if (orpo || options.ftx > 1e-6) v.emplace_back(prefix + "sft_loss", m.sft_loss());
  if (orpo) v.emplace_back(prefix + "odds_ratio_loss", m.odds_ratio_loss());
  return v;
}

PreferenceMetrics score_pairs(const PreferenceOptions& options, const Batch& batch, const std::vector<double>& logps) {
  PreferenceObjective objective(options, batch);
  std::vector<double> unused(logps.size());
  objective.weigh(0, logps, unused);
  return objective.metrics();
}

}  // namespace mt
