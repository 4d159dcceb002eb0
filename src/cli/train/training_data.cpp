// load_training_data: tokenizer from the model directory, load_datasets, the evaluation set, optional packing with
// its log line.
// Invariant: the tokenizer is read only when a text dataset needs it.
#include "cli/train/training_data.h"

#include <fmt/format.h>

#include <filesystem>

#include "config/yaml_fields.h"
#include "core/error.h"
#include "core/log.h"
#include "data/block_stream.h"
#include "data/dataset_registry.h"
#include "data/eval_split.h"
#include "data/formats/pretrain_loader.h"
#include "data/packing.h"

namespace mt {
namespace {

std::unique_ptr<Tokenizer> load_tokenizer(const DatasetConfig& dataset, const ModelSource& source) {
  MT_REQUIRE(!source.dir.empty(),
             "dataset.name '{}' has text datasets, which need the model's tokenizer, but model.name is the bare "
             "config file {}; use a model directory with tokenizer.json",
             dataset.name, source.config_json.string());
  MT_REQUIRE(std::filesystem::exists(source.dir / "tokenizer.json"),
             "dataset.name '{}' has text datasets, which need the model's tokenizer, but {} has no tokenizer.json",
             dataset.name, source.dir.string());
  return Tokenizer::from_directory(source.dir);
}

}  // namespace

TrainingData load_training_data(const Config& config, const ModelSource& source, const ModelSpec& spec, bool pack) {
  const DatasetConfig& dataset = config.dataset;
  const std::string origin = config.source.empty() ? std::string("the configuration") : config.source.string();
  DatasetConfig eval_config = dataset;
  eval_config.name = dataset.eval_dataset;
  // The evaluation set's names resolve before any file is read, and its errors name the key.
  const auto for_eval = [&](const auto& action) {
    try {
      return action();
    } catch (const Error& e) {
      throw Error(fmt::format("{}: dataset.eval_dataset '{}': {}", origin, dataset.eval_dataset, e.what()));
    }
  };
  const bool eval_text = !dataset.eval_dataset.empty() && for_eval([&] { return needs_tokenizer(eval_config); });
  TrainingData data;
  if ((!dataset.streaming && needs_tokenizer(dataset)) || eval_text)
    data.tokenizer = load_tokenizer(dataset, source);
  const TextOptions text{data.tokenizer.get(), spec.family, config.training.stage == "pt", source.dir,
                         config.training.stage == "dpo", config.training.stage == "kto"};
  if (!dataset.streaming) data.examples = load_datasets(dataset, spec.vocab_size, text, &data.stats);
  if (!dataset.eval_dataset.empty()) {
    DatasetStats eval_stats;
    data.eval_examples = for_eval([&] { return load_datasets(eval_config, spec.vocab_size, text, &eval_stats); });
    log::info("evaluation set dataset.eval_dataset '{}': {} examples, {} tokens", dataset.eval_dataset,
              data.eval_examples.size(), eval_stats.tokens);
  } else if (dataset.val_size > 0.0) {
    EvalSplit split = split_eval(std::move(data.examples), dataset.val_size, config.training.seed, origin);
    data.examples = std::move(split.train);
    data.eval_examples = std::move(split.eval);
    int64_t held_tokens = 0;
    for (const Example& e : data.eval_examples) held_tokens += static_cast<int64_t>(e.input_ids.size());
    data.stats.examples -= static_cast<int64_t>(data.eval_examples.size());
    data.stats.tokens -= held_tokens;
    log::info("evaluation set: dataset.val_size {} holds out {} of {} examples ({} tokens), drawn with seed {}",
              real_to_text(dataset.val_size), data.eval_examples.size(),
              data.examples.size() + data.eval_examples.size(), held_tokens, config.training.seed);
  }
  if (pack && dataset.packing) {
    const size_t examples = data.examples.size();
    data.examples = pack_examples(std::move(data.examples), dataset.max_seq_len);
    log::info("packing: {} examples into {} sequences of at most {} tokens ({:.1f}% of their capacity used)",
              examples, data.examples.size(), dataset.max_seq_len,
              100.0 * static_cast<double>(data.stats.tokens) /
                  static_cast<double>(static_cast<int64_t>(data.examples.size()) * dataset.max_seq_len));
  }
  return data;
}

std::unique_ptr<BatchSource> make_batch_source(const Config& c, const ModelSource& source, const ModelSpec& spec,
                                               std::vector<Example> examples) {
  if (!c.dataset.streaming)
    return std::make_unique<Batcher>(std::move(examples), c.training.batch_size, c.dataset.shuffle, c.training.seed);
  const DatasetRegistry registry(c.dataset.dataset_dir);
  std::vector<DatasetEntry> entries;
  for (const std::string& name : dataset_names(c.dataset.name)) entries.push_back(registry.entry(name));
  std::shared_ptr<const Tokenizer> tokenizer = load_tokenizer(c.dataset, source);
  const PretrainTokens special = pretrain_tokens(c.dataset.template_name, *tokenizer, source.dir);
  log::info("dataset.streaming: blocks of {} tokens read from {} file(s) as training goes, in corpus order (EOS: {}{})",
            c.dataset.max_seq_len, entries.size(), special.eos_source,
            special.bos ? "; each block opens with the BOS, add_bos_token" : "");
  return std::make_unique<BlockStream>(std::move(entries), std::move(tokenizer), c.dataset.max_seq_len,
                                       c.training.batch_size, c.dataset.max_samples, spec.vocab_size, special);
}

}  // namespace mt
