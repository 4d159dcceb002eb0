// Examples and the global batch of one optimizer step, as the engine consumes them.
// Invariant: a Batch is right-padded to its longest sequence; targets are labels shifted by one inside each packed
// example (targets[t] = labels[t+1], -100 = ignored, and -100 at each example's last position and on padding).
#pragma once
#include <cstdint>
#include <vector>

namespace mt {

constexpr int32_t kIgnoreIndex = -100;

struct Example {
  std::vector<int32_t> input_ids;
  std::vector<int32_t> labels;   // same length as input_ids; kIgnoreIndex where not trained
  std::vector<int32_t> pieces = {};  // packed: lengths of the examples laid end to end (sum = size); empty: one
};

struct Batch {
  int64_t num_seqs = 0;
  int64_t seq_len = 0;                 // padded length (longest sequence in the batch)
  std::vector<int32_t> input_ids;      // [num_seqs * seq_len], padding = 0
  std::vector<int32_t> targets;        // [num_seqs * seq_len]
  std::vector<int32_t> positions;      // [num_seqs * seq_len], position ids (0.. per sequence; restart per packed example)
  std::vector<int32_t> seq_lens;       // [num_seqs] valid tokens per sequence
  std::vector<int32_t> segments;       // [num_seqs * seq_len] packed-example ids (0.. per sequence, -1 on padding);
                                       // empty when no example of the batch is packed
  int64_t num_target_tokens = 0;       // targets != -100
  int64_t num_tokens = 0;              // non-padding tokens
};

// Right-pads `examples` into a Batch (the shift to targets and, for packed examples, segments happen here).
Batch make_batch(const std::vector<Example>& examples);

}  // namespace mt
