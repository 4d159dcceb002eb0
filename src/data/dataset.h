// Datasets registered in <dataset_dir>/dataset_info.json (LLaMA-Factory's format: tokenized, alpaca, sharegpt),
// loaded into Examples, and the Batcher that hands out one global batch per optimizer step.
// Invariant: every Example the loader returns has ids in [0, vocab_size) and labels in that range or -100;
// bad input raises mt::Error naming the file and line (or the dataset_info.json entry and key).
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/batch.h"
#include "data/batch_source.h"

namespace mt {

class Tokenizer;

struct DatasetStats {
  int64_t examples = 0;
  int64_t tokens = 0;
  int64_t truncated = 0;   // examples cut to max_seq_len
  int64_t dropped = 0;     // examples with no trained token left
  int64_t skipped = 0;     // text records that are no usable conversation (empty, unknown role, not alternating...)
  int64_t documents = 0;   // training.stage pt: documents read
  int64_t dropped_tokens = 0;  // training.stage pt: the final remainder shorter than a block
};

// What text datasets (alpaca, sharegpt) need; tokenized datasets need none of it.
struct TextOptions {
  const Tokenizer* tokenizer = nullptr;  // nullptr: a text dataset raises mt::Error
  std::string model_family;              // ModelSpec::family: picks the template for template: auto
  bool pretrain = false;                 // training.stage pt: documents cut into blocks (formats/pretrain_loader.h)
  std::filesystem::path tokenizer_dir{}; // where the tokenizer was read: template: jinja reads its chat template
  bool pairwise = false;                 // training.stage dpo: every dataset is preference pairs ("ranking": true)
  bool unpaired = false;                 // training.stage kto: every dataset is KTO examples (columns.kto_tag)
};

// The entries a comma-separated dataset.name lists, trimmed; an empty name or list raises mt::Error.
std::vector<std::string> dataset_names(const std::string& list);

// True when a dataset named in config.name is a text dataset, i.e. loading needs a tokenizer.
bool needs_tokenizer(const DatasetConfig& config);

// Loads every dataset named in config.name (comma-separated) in order, rendering text datasets with
// config.template_name and truncating to max_seq_len (see data/formats/truncation.h). Never packs. With
// text.pretrain, the documents of every dataset are concatenated and cut into max_seq_len blocks instead.
// config.max_samples > 0 keeps the first max_samples examples (documents for pt; records for KTO text, which are
// merged over every dataset before their KL shift, as LLaMA-Factory does) of each dataset.
std::vector<Example> load_datasets(const DatasetConfig& config, int64_t vocab_size, const TextOptions& text,
                                   DatasetStats* stats);

// A permutation of 0..n-1 drawn from `seed` by our own Fisher-Yates over std::mt19937_64's raw outputs (the same on
// every standard library).
std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed);

class Batcher final : public BatchSource {
 public:
  // shuffle: each epoch's order is a permutation drawn from (seed, epoch); otherwise file order.
  Batcher(std::vector<Example> examples, int64_t batch_size, bool shuffle, uint64_t seed);
  // next(): the next batch_size examples (wrapping into the next epoch). batch() reads only the examples, so other
  // threads may call it while the cursor moves on.
  std::vector<int64_t> next_indices() override;
  Batch batch(const std::vector<int64_t>& indices) override;
  DataCursor cursor() const override { return cursor_; }
  void seek(const DataCursor& cursor) override;
  int64_t num_examples() const { return static_cast<int64_t>(examples_.size()); }

 private:
  void build_order();
  std::vector<Example> examples_;
  int64_t batch_size_;
  bool shuffle_;
  uint64_t seed_;
  DataCursor cursor_;
  std::vector<int64_t> order_;
};

}  // namespace mt
