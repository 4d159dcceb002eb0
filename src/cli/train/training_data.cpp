// load_training_data: tokenizer from the model directory, load_datasets, optional packing with its log line.
// Invariant: the tokenizer is read only when a text dataset needs it.
#include "cli/train/training_data.h"

#include <filesystem>

#include "core/error.h"
#include "core/log.h"
#include "data/packing.h"

namespace mt {

TrainingData load_training_data(const DatasetConfig& dataset, const ModelSource& source, const ModelSpec& spec,
                                bool pack) {
  TrainingData data;
  if (needs_tokenizer(dataset)) {
    MT_REQUIRE(!source.dir.empty(),
               "dataset.name '{}' has text datasets, which need the model's tokenizer, but model.name is the bare "
               "config file {}; use a model directory with tokenizer.json",
               dataset.name, source.config_json.string());
    MT_REQUIRE(std::filesystem::exists(source.dir / "tokenizer.json"),
               "dataset.name '{}' has text datasets, which need the model's tokenizer, but {} has no tokenizer.json",
               dataset.name, source.dir.string());
    data.tokenizer = Tokenizer::from_directory(source.dir);
  }
  data.examples = load_datasets(dataset, spec.vocab_size, TextOptions{data.tokenizer.get(), spec.family},
                                &data.stats);
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

}  // namespace mt
