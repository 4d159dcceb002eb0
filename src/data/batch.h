// Examples and the global batch of one optimizer step, as the engine consumes them.
// Invariant: a Batch is right-padded to its longest sequence; a batch of preference pairs holds each pair's chosen and
// rejected sequences at 2i and 2i + 1; a batch of N KTO examples holds their completions at 0..N-1 and their KL
// sequences (the mismatched completions) at N..2N-1; targets are labels shifted by one inside each packed
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
  // A preference pair (training.stage dpo): input_ids / labels are the chosen sequence, these the rejected one (the
  // same prompt); reference_logps the reference model's summed log-probability of each, once known.
  std::vector<int32_t> rejected_ids = {};
  std::vector<int32_t> rejected_labels = {};
  // A KTO example (training.stage kto): input_ids / labels are its completion, desirable its kto_tag, kl_ids /
  // kl_labels the same prompt with another example's completion (KTO's KL term); reference_logps then holds the
  // reference model's summed log-probability of the completion and of the KL sequence.
  std::vector<int32_t> kl_ids = {};
  std::vector<int32_t> kl_labels = {};
  bool desirable = false;
  std::vector<double> reference_logps = {};
  bool is_pair() const { return !rejected_ids.empty(); }
  bool is_kto() const { return !kl_ids.empty(); }
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
  // Preference pairs and KTO examples: [num_seqs] each sequence's reference log-probability where the examples carry
  // one, else empty.
  std::vector<double> reference_logps;
  // KTO: [num_seqs / 2] each example's kto_tag (1 desirable); empty for any other batch.
  std::vector<uint8_t> desirable;
};

// Right-pads `examples` into a Batch (the shift to targets and, for packed examples, segments happen here). A
// preference pair gives two consecutive sequences, chosen then rejected; N KTO examples give their N completions,
// then their N KL sequences.
Batch make_batch(const std::vector<Example>& examples);
// make_batch of plain sequences (no pairs).
Batch make_batch_of_sequences(const std::vector<Example>& examples);
// Each sequence's targets (targets != −100): a sequence's response tokens.
std::vector<int64_t> target_counts(const Batch& batch);
// Sequences [first, first + count) of `batch` as a batch of their own, padded to their longest (no KTO tags, the
// rows' reference log-probabilities where the batch has them).
Batch batch_rows(const Batch& batch, int64_t first, int64_t count);

}  // namespace mt
