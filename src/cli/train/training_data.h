// The training data of a run, shared by `train` and `preview-data`: the model's tokenizer (loaded only when a text
// dataset needs it), the examples of dataset.name, their counts, packing when asked for, and the held-out evaluation
// examples (dataset.eval_dataset, or dataset.val_size split out of dataset.name before packing).
// Invariant: a text dataset without a tokenizer.json in the model directory fails with one message naming both; the
// evaluation examples are never packed and never among the training examples.
#pragma once
#include <memory>
#include <vector>

#include "config/config.h"
#include "data/batch.h"
#include "data/batch_source.h"
#include "data/dataset.h"
#include "data/tokenizer.h"
#include "model/model_source.h"
#include "model/model_spec.h"

namespace mt {

struct TrainingData {
  std::unique_ptr<Tokenizer> tokenizer;  // null when every dataset is pre-tokenized
  std::vector<Example> examples;         // load order; packed into sequences when `pack` and dataset.packing
  std::vector<Example> eval_examples;    // empty: no evaluation
  DatasetStats stats;
};

// With dataset.streaming the training examples stay in their files (make_batch_source reads them); only the
// evaluation set is loaded.
TrainingData load_training_data(const Config& config, const ModelSource& source, const ModelSpec& spec, bool pack);

// What hands out the run's batches: a Batcher over `examples`, or with dataset.streaming a BlockStream over
// dataset.name's files (every compute rank reads them itself, with its own tokenizer).
std::unique_ptr<BatchSource> make_batch_source(const Config& config, const ModelSource& source, const ModelSpec& spec,
                                               std::vector<Example> examples);

}  // namespace mt
