// make_batch: right-pads examples and shifts labels into targets (Hugging Face's causal-LM loss shift).
// Invariant: targets[t] = labels[t+1] inside a sequence; -100 at its last token and on padding; padding ids 0.
#include "data/batch.h"

#include <algorithm>

#include "core/error.h"

namespace mt {

Batch make_batch(const std::vector<Example>& examples) {
  MT_ASSERT(!examples.empty());
  Batch batch;
  batch.num_seqs = static_cast<int64_t>(examples.size());
  for (const Example& e : examples) {
    MT_ASSERT(!e.input_ids.empty() && e.labels.size() == e.input_ids.size());
    batch.seq_len = std::max(batch.seq_len, static_cast<int64_t>(e.input_ids.size()));
  }
  const size_t cells = static_cast<size_t>(batch.num_seqs * batch.seq_len);
  batch.input_ids.assign(cells, 0);
  batch.targets.assign(cells, kIgnoreIndex);
  batch.positions.assign(cells, 0);
  batch.seq_lens.reserve(examples.size());
  for (size_t s = 0; s < examples.size(); ++s) {
    const Example& e = examples[s];
    const size_t len = e.input_ids.size();
    const size_t row = s * static_cast<size_t>(batch.seq_len);
    for (size_t t = 0; t < len; ++t) {
      batch.input_ids[row + t] = e.input_ids[t];
      batch.positions[row + t] = static_cast<int32_t>(t);
      if (t + 1 < len) batch.targets[row + t] = e.labels[t + 1];
      if (batch.targets[row + t] != kIgnoreIndex) ++batch.num_target_tokens;
    }
    batch.seq_lens.push_back(static_cast<int32_t>(len));
    batch.num_tokens += static_cast<int64_t>(len);
  }
  return batch;
}

}  // namespace mt
