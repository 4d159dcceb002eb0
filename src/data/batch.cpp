// make_batch: right-pads examples and shifts labels into targets (Hugging Face's causal-LM loss shift).
// Invariant: targets[t] = labels[t+1] inside one (packed) example; -100 at its last token and on padding; padding
// ids 0; positions and segment ids restart at each packed example.
#include "data/batch.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace mt {

namespace {

// The rejected sequence of a pair as an Example of its own.
Example rejected_of(const Example& pair) { return {pair.rejected_ids, pair.rejected_labels}; }

// N KTO examples: their completions, then their KL sequences; the tags and reference log-probabilities alike.
Batch make_kto_batch(const std::vector<Example>& examples) {
  std::vector<Example> sequences;
  std::vector<double> reference;
  std::vector<uint8_t> desirable;
  const bool referenced = !examples.front().reference_logps.empty();
  for (const Example& e : examples) {
    MT_ASSERT(e.is_kto() && e.reference_logps.empty() == !referenced,
              "a batch mixes KTO examples and others, or examples with and without reference log-probabilities");
    sequences.push_back({e.input_ids, e.labels});
    desirable.push_back(e.desirable ? 1 : 0);
    if (referenced) reference.push_back(e.reference_logps[0]);
  }
  for (const Example& e : examples) {
    sequences.push_back({e.kl_ids, e.kl_labels});
    if (referenced) reference.push_back(e.reference_logps[1]);
  }
  Batch batch = make_batch_of_sequences(sequences);
  batch.reference_logps = std::move(reference);
  batch.desirable = std::move(desirable);
  return batch;
}

}  // namespace

Batch make_batch(const std::vector<Example>& pairs_or_examples) {
  MT_ASSERT(!pairs_or_examples.empty());
  if (pairs_or_examples.front().is_kto()) return make_kto_batch(pairs_or_examples);
  if (!pairs_or_examples.front().is_pair()) return make_batch_of_sequences(pairs_or_examples);
  std::vector<Example> sequences;
  std::vector<double> reference;
  const bool referenced = !pairs_or_examples.front().reference_logps.empty();
  for (const Example& pair : pairs_or_examples) {
    MT_ASSERT(pair.is_pair() && pair.reference_logps.empty() == !referenced,
              "a batch mixes pairs and examples, or pairs with and without reference log-probabilities");
    sequences.push_back({pair.input_ids, pair.labels});
    sequences.push_back(rejected_of(pair));
    reference.insert(reference.end(), pair.reference_logps.begin(), pair.reference_logps.end());
  }
  Batch batch = make_batch_of_sequences(sequences);
  batch.reference_logps = std::move(reference);
  return batch;
}

Batch make_batch_of_sequences(const std::vector<Example>& examples) {
  MT_ASSERT(!examples.empty());
  Batch batch;
  batch.num_seqs = static_cast<int64_t>(examples.size());
  bool packed = false;
  for (const Example& e : examples) {
    MT_ASSERT(!e.input_ids.empty() && e.labels.size() == e.input_ids.size() && !e.is_pair() && !e.is_kto());
    MT_ASSERT(e.pieces.empty() ||
              std::accumulate(e.pieces.begin(), e.pieces.end(), size_t{0}) == e.input_ids.size());
    batch.seq_len = std::max(batch.seq_len, static_cast<int64_t>(e.input_ids.size()));
    packed = packed || !e.pieces.empty();
  }
  const size_t cells = static_cast<size_t>(batch.num_seqs * batch.seq_len);
  batch.input_ids.assign(cells, 0);
  batch.targets.assign(cells, kIgnoreIndex);
  batch.positions.assign(cells, 0);
  if (packed) batch.segments.assign(cells, -1);
  batch.seq_lens.reserve(examples.size());
  for (size_t s = 0; s < examples.size(); ++s) {
    const Example& e = examples[s];
    const size_t len = e.input_ids.size();
    const size_t row = s * static_cast<size_t>(batch.seq_len);
    const std::vector<int32_t> whole = {static_cast<int32_t>(len)};
    size_t start = 0;
    int32_t segment = 0;
    for (const int32_t piece : e.pieces.empty() ? whole : e.pieces) {
      const size_t end = start + static_cast<size_t>(piece);
      for (size_t t = start; t < end; ++t) {
        batch.input_ids[row + t] = e.input_ids[t];
        batch.positions[row + t] = static_cast<int32_t>(t - start);
        if (packed) batch.segments[row + t] = segment;
        if (t + 1 < end) batch.targets[row + t] = e.labels[t + 1];
        if (batch.targets[row + t] != kIgnoreIndex) ++batch.num_target_tokens;
      }
      start = end;
      ++segment;
    }
    batch.seq_lens.push_back(static_cast<int32_t>(len));
    batch.num_tokens += static_cast<int64_t>(len);
  }
  return batch;
}

std::vector<int64_t> target_counts(const Batch& batch) {
  std::vector<int64_t> counts(static_cast<size_t>(batch.num_seqs), 0);
  for (int64_t s = 0; s < batch.num_seqs; ++s)
    for (int64_t t = 0; t < batch.seq_len; ++t)
      counts[static_cast<size_t>(s)] += batch.targets[static_cast<size_t>(s * batch.seq_len + t)] != kIgnoreIndex;
  return counts;
}

Batch batch_rows(const Batch& global, int64_t first, int64_t count) {
  MT_ASSERT(first >= 0 && count >= 0 && first + count <= global.num_seqs);
  Batch rows;
  rows.num_seqs = count;
  for (int64_t s = first; s < first + count; ++s)
    rows.seq_len = std::max<int64_t>(rows.seq_len, global.seq_lens[static_cast<size_t>(s)]);
  const int64_t S = rows.seq_len, G = global.seq_len;
  const bool segmented = !global.segments.empty();
  for (int64_t s = first; s < first + count; ++s) {
    const auto from = static_cast<std::ptrdiff_t>(s * G), to = from + static_cast<std::ptrdiff_t>(S);
    rows.input_ids.insert(rows.input_ids.end(), global.input_ids.begin() + from, global.input_ids.begin() + to);
    rows.targets.insert(rows.targets.end(), global.targets.begin() + from, global.targets.begin() + to);
    rows.positions.insert(rows.positions.end(), global.positions.begin() + from, global.positions.begin() + to);
    if (segmented)
      rows.segments.insert(rows.segments.end(), global.segments.begin() + from, global.segments.begin() + to);
    rows.seq_lens.push_back(global.seq_lens[static_cast<size_t>(s)]);
    rows.num_tokens += global.seq_lens[static_cast<size_t>(s)];
    if (!global.reference_logps.empty()) rows.reference_logps.push_back(global.reference_logps[static_cast<size_t>(s)]);
  }
  rows.num_target_tokens = std::count_if(rows.targets.begin(), rows.targets.end(),
                                         [](int32_t t) { return t != kIgnoreIndex; });
  return rows;
}

}  // namespace mt
