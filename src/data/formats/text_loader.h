// Loader for formatting alpaca and sharegpt: records -> Conversations -> chat template -> truncated Examples.
// Invariant: Examples have ids in [0, vocab_size), at most max_seq_len tokens, a trained target, file order; no record
// is dropped silently (skips are counted and reported, malformed input is an error naming file:line or the column).
#pragma once
#include <cstdint>
#include <vector>

#include "data/batch.h"
#include "data/dataset.h"
#include "data/dataset_registry.h"
#include "data/templates/template_renderer.h"

namespace mt {

struct TextLimits {
  int64_t max_seq_len = 0;
  bool train_on_prompt = false;
  int64_t vocab_size = 0;      // the model's; a larger token id is an error (tokenizer and model do not match)
};

// Records that are no conversation are skipped, counted in stats->skipped and summarised in one warning naming
// the first offending file:line per reason. Malformed JSON, wrong field types and a column that no record has raise
// mt::Error. Adds this file's counts to *stats.
std::vector<Example> load_text(const DatasetEntry& entry, const TemplateRenderer& renderer, const TextLimits& limits,
                               DatasetStats* stats);

}  // namespace mt
