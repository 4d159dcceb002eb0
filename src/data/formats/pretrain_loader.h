// Continued pre-training data (training.stage: pt), as LLaMA-Factory's pre-training preprocessing builds it: each
// record's text column (columns.prompt, "instruction" by default; "text" for a .txt file's lines) is tokenized without
// special tokens with the EOS appended, the documents of every dataset are laid end to end in load order, and the
// stream is cut into blocks of max_seq_len tokens, every token trained. The EOS is LLaMA-Factory's: <|end_of_text|>
// for template llama3, a named template's replaced EOS (its first stop word: qwen's <|im_end|>), else the
// tokenizer's; where tokenizer_config.json sets add_bos_token, each block's first token is overwritten with the BOS.
// Invariant: with batch_documents 0 the blocks hold every token of the concatenated documents exactly once, in order,
// but the final remainder shorter than a block; with batch_documents N each run of N documents (across datasets, as
// LLaMA-Factory's batched map) is cut on its own and its remainder left out (counted in *dropped_tokens). A record
// without the text column is an error naming file:line and the column.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/dataset.h"
#include "data/dataset_registry.h"
#include "data/formats/record_files.h"

namespace mt {

class Tokenizer;

struct PretrainTokens {
  int32_t eos = 0;
  std::optional<int32_t> bos;  // written over each block's first token (add_bos_token)
  std::string eos_source;      // for the log: which rule chose the EOS
};

// The EOS and BOS above for dataset.template `template_name` ("auto" and "jinja" keep the tokenizer's EOS, as
// LLaMA-Factory does with no template named); a missing token raises mt::Error naming it.
PretrainTokens pretrain_tokens(const std::string& template_name, const Tokenizer& tokenizer,
                               const std::filesystem::path& tokenizer_dir);

// Appends the tokens of entry's documents (each followed by eos_id) to `stream` and each document's end offset to
// `document_ends`; at most max_samples documents when max_samples > 0; a .txt file's documents as sample_by splits
// it. Returns the number of documents read.
int64_t append_documents(const DatasetEntry& entry, const Tokenizer& tokenizer, int32_t eos_id, int64_t max_samples,
                         int64_t vocab_size, std::vector<int32_t>& stream, std::vector<size_t>& document_ends,
                         TextSample sample_by = TextSample::line);

// The stream cut into blocks of block_size tokens (labels = ids), per batch of batch_documents documents (0: the
// whole stream); remainders are dropped and counted; bos, when given, replaces each block's first token.
std::vector<Example> cut_blocks(const std::vector<int32_t>& stream, const std::vector<size_t>& document_ends,
                                int64_t batch_documents, int64_t block_size, std::optional<int32_t> bos,
                                int64_t* dropped_tokens);

}  // namespace mt
