// Continued pre-training data (training.stage: pt), as LLaMA-Factory's pre-training preprocessing builds it: each
// record's text column (columns.prompt, "instruction" by default; "text" for a .txt file's lines) is tokenized without
// special tokens with the tokenizer's EOS appended, the documents of every dataset are laid end to end in load order,
// and the stream is cut into blocks of max_seq_len tokens, every token trained.
// Invariant: the blocks hold every token of the concatenated documents exactly once, in order, but the final remainder
// shorter than a block (counted in stats->dropped_tokens); a record without the text column is an error naming
// file:line and the column.
#pragma once
#include <cstdint>
#include <vector>

#include "data/batch.h"
#include "data/dataset.h"
#include "data/dataset_registry.h"

namespace mt {

class Tokenizer;

// Appends the tokens of entry's documents (each followed by eos_id) to `stream`; at most max_samples documents when
// max_samples > 0. Returns the number of documents read.
int64_t append_documents(const DatasetEntry& entry, const Tokenizer& tokenizer, int32_t eos_id, int64_t max_samples,
                         int64_t vocab_size, std::vector<int32_t>& stream);

// The stream cut into blocks of block_size tokens (labels = ids); the remainder is dropped and counted.
std::vector<Example> cut_blocks(const std::vector<int32_t>& stream, int64_t block_size, int64_t* dropped_tokens);

}  // namespace mt
