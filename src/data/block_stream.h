// BlockStream (dataset.streaming, training.stage pt): the pre-training blocks of pretrain_loader.h read from the
// corpus files as training consumes them, instead of all at load time: a file far larger than host RAM trains, the
// memory held being the blocks of the batches built ahead (dataset.num_workers) plus less than one block and one
// document of tokens. Blocks come in corpus order (no shuffle), epoch after epoch; the final remainder of each pass
// shorter than a block is left out, as in the in-memory path, so both give the same blocks.
// Invariant: the block sequence is a pure function of the files; seek({epoch, index}) re-reads the corpus from its
// start and skips `index` blocks, so a resumed run continues with exactly the blocks an uninterrupted one would get.
#pragma once
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "data/batch.h"
#include "data/batch_source.h"
#include "data/dataset_registry.h"
#include "data/formats/pretrain_loader.h"

namespace mt {

class Tokenizer;

class BlockStream final : public BatchSource {
 public:
  // entries: line-oriented files only (.txt, .jsonl), checked here; max_samples > 0: documents per file per pass;
  // special: the EOS and BOS of pretrain_tokens (none: the tokenizer's EOS, no BOS).
  BlockStream(std::vector<DatasetEntry> entries, std::shared_ptr<const Tokenizer> tokenizer, int64_t block_size,
              int64_t batch_size, int64_t max_samples, int64_t vocab_size,
              std::optional<PretrainTokens> special = std::nullopt);
  ~BlockStream() override;

  std::vector<int64_t> next_indices() override;
  Batch batch(const std::vector<int64_t>& indices) override;
  DataCursor cursor() const override { return cursor_; }
  void seek(const DataCursor& cursor) override;

  // What the stream holds now: tokens read but not yet in a block, and blocks read but not yet batched.
  int64_t buffered_tokens() const { return static_cast<int64_t>(tokens_.size()); }
  int64_t pending_blocks() const;

 private:
  Example read_block();       // the next block, wrapping into the next pass at the corpus end
  bool read_document();       // appends one document (+ EOS) to tokens_; false at the end of the corpus
  void restart();             // back to the first file of the corpus

  std::vector<DatasetEntry> entries_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  int32_t eos_id_ = 0;
  std::optional<int32_t> bos_id_;     // written over each block's first token
  int64_t block_size_, batch_size_, max_samples_, vocab_size_;
  DataCursor cursor_;
  size_t file_ = 0;                   // entries_[file_] is open in in_
  std::ifstream in_;
  int64_t line_ = 0, documents_in_file_ = 0;
  std::vector<int32_t> tokens_;       // read, not yet cut into a block
  int64_t serial_ = 0;                // the next block's number in next_indices
  mutable std::mutex mutex_;  // guards pending_
  std::map<int64_t, Example> pending_;  // blocks handed out by next_indices, waiting for batch()
};

}  // namespace mt
