// Datasets registered in <dataset_dir>/dataset_info.json (LLaMA-Factory's format), loaded into Examples,
// and the Batcher that hands out one global batch per optimizer step.
// Invariant: every Example the loader returns has ids in [0, vocab_size) and labels in that range or -100;
// bad input raises mt::Error naming the file and line (or the dataset_info.json entry and key).
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/batch.h"

namespace mt {

struct DatasetStats {
  int64_t examples = 0;
  int64_t tokens = 0;
  int64_t truncated = 0;   // examples cut to max_seq_len
  int64_t dropped = 0;     // examples with no trained token left
};

// Loads every dataset named in config.name (comma-separated) in order, truncating to max_seq_len.
std::vector<Example> load_datasets(const DatasetConfig& config, int64_t vocab_size, DatasetStats* stats);

// Position in the example stream; part of the training state.
struct DataCursor {
  int64_t epoch = 0;
  int64_t index = 0;       // next example within the epoch's order
};

class Batcher {
 public:
  // shuffle: each epoch's order is a permutation drawn from (seed, epoch); otherwise file order.
  Batcher(std::vector<Example> examples, int64_t batch_size, bool shuffle, uint64_t seed);
  Batch next();            // the next batch_size examples (wrapping into the next epoch)
  DataCursor cursor() const { return cursor_; }
  void seek(const DataCursor& cursor);
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
