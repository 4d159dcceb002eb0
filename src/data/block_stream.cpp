// BlockStream (see block_stream.h).
#include "data/block_stream.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/tokenizer.h"

namespace mt {

BlockStream::BlockStream(std::vector<DatasetEntry> entries, std::shared_ptr<const Tokenizer> tokenizer,
                         int64_t block_size, int64_t batch_size, int64_t max_samples, int64_t vocab_size,
                         std::optional<PretrainTokens> special)
    : entries_(std::move(entries)), tokenizer_(std::move(tokenizer)), block_size_(block_size), batch_size_(batch_size),
      max_samples_(max_samples), vocab_size_(vocab_size) {
  MT_REQUIRE(!entries_.empty(), "dataset.streaming: no dataset to stream");
  for (const DatasetEntry& e : entries_) {
    const std::string ext = e.file.extension().string();
    MT_REQUIRE(ext == ".txt" || ext == ".jsonl",
               "dataset '{}': {}: dataset.streaming reads .txt and .jsonl files (one document per line), not {}",
               e.name, e.file.string(), ext.empty() ? std::string("a file without extension") : ext);
    MT_REQUIRE(e.formatting == "alpaca", "dataset '{}': formatting {} has no plain text for training.stage pt",
               e.name, e.formatting);
    MT_REQUIRE(std::filesystem::is_regular_file(e.file), "dataset '{}': {}: file not found", e.name, e.file.string());
  }
  const std::optional<int32_t> eos = special ? std::optional<int32_t>(special->eos) : tokenizer_->eos_id();
  MT_REQUIRE(eos.has_value(), "dataset.streaming: training.stage pt appends the EOS token to each document, but the "
             "tokenizer has no eos_token (tokenizer_config.json)");
  eos_id_ = *eos;
  if (special) bos_id_ = special->bos;
  MT_ASSERT(block_size_ >= 2 && batch_size_ >= 1);
  restart();
  // One block must exist, or the stream would wrap forever.
  Example first = read_block();
  (void)first;
  seek({0, 0});
}

BlockStream::~BlockStream() = default;

void BlockStream::restart() {
  file_ = 0;
  in_.close();
  in_.clear();
  in_.open(entries_[0].file, std::ios::binary);
  MT_REQUIRE(in_.good(), "dataset '{}': {}: cannot open", entries_[0].name, entries_[0].file.string());
  line_ = 0;
  documents_in_file_ = 0;
  tokens_.clear();
}

bool BlockStream::read_document() {
  while (true) {
    const DatasetEntry& e = entries_[file_];
    std::string line;
    const bool capped = max_samples_ > 0 && documents_in_file_ == max_samples_;
    if (!capped && std::getline(in_, line)) {
      ++line_;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      std::string text = line;
      if (e.file.extension() == ".jsonl") {
        if (line.find_first_not_of(" \t") == std::string::npos) continue;  // a blank line of a JSONL file
        const std::string where = fmt::format("dataset '{}': {}:{}", e.name, e.file.string(), line_);
        nlohmann::json record;
        try {
          record = nlohmann::json::parse(line);
        } catch (const nlohmann::json::parse_error& err) {
          throw Error(fmt::format("{}: malformed JSON: {}", where, err.what()));
        }
        const std::string column = e.column("prompt");
        MT_REQUIRE(record.is_object() && record.contains(column) && record[column].is_string(),
                   "{}: the record has no text column \"{}\" (columns.prompt{})", where, column,
                   e.columns.count("prompt") ? "" : ", LLaMA-Factory's default");
        text = record[column].get<std::string>();
      }
      for (const int32_t id : tokenizer_->encode(text)) {
        MT_REQUIRE(id >= 0 && id < vocab_size_, "dataset '{}': {}:{}: token id {} is outside the model's vocab_size {}",
                   e.name, e.file.string(), line_, id, vocab_size_);
        tokens_.push_back(id);
      }
      tokens_.push_back(eos_id_);
      ++documents_in_file_;
      return true;
    }
    if (file_ + 1 == entries_.size()) return false;
    ++file_;
    in_.close();
    in_.clear();
    in_.open(entries_[file_].file, std::ios::binary);
    MT_REQUIRE(in_.good(), "dataset '{}': {}: cannot open", entries_[file_].name, entries_[file_].file.string());
    line_ = 0;
    documents_in_file_ = 0;
  }
}

Example BlockStream::read_block() {
  bool wrapped = false;
  while (static_cast<int64_t>(tokens_.size()) < block_size_) {
    if (read_document()) continue;
    MT_REQUIRE(!wrapped, "dataset '{}': the corpus does not fill one block of dataset.max_seq_len {}",
               entries_[0].name, block_size_);
    restart();  // the remainder shorter than a block is left out, as in the in-memory path
    ++cursor_.epoch;
    cursor_.index = 0;
    wrapped = true;
  }
  Example block;
  block.input_ids.assign(tokens_.begin(), tokens_.begin() + block_size_);
  if (bos_id_) block.input_ids[0] = *bos_id_;
  block.labels = block.input_ids;
  tokens_.erase(tokens_.begin(), tokens_.begin() + block_size_);
  ++cursor_.index;
  return block;
}

std::vector<int64_t> BlockStream::next_indices() {
  std::vector<int64_t> serials;
  for (int64_t k = 0; k < batch_size_; ++k) {
    Example block = read_block();
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.emplace(serial_, std::move(block));
    serials.push_back(serial_++);
  }
  return serials;
}

Batch BlockStream::batch(const std::vector<int64_t>& serials) {
  std::vector<Example> blocks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const int64_t s : serials) {
      const auto it = pending_.find(s);
      MT_ASSERT(it != pending_.end(), "block {} was not handed out or was batched twice", s);
      blocks.push_back(std::move(it->second));
      pending_.erase(it);
    }
  }
  return make_batch(blocks);
}

int64_t BlockStream::pending_blocks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(pending_.size());
}

void BlockStream::seek(const DataCursor& cursor) {
  MT_REQUIRE(cursor.epoch >= 0 && cursor.index >= 0, "data cursor (epoch {}, index {}) is not a stream position",
             cursor.epoch, cursor.index);
  restart();
  cursor_ = {cursor.epoch, 0};
  for (int64_t k = 0; k < cursor.index; ++k) {
    read_block();
    MT_REQUIRE(cursor_.epoch == cursor.epoch, "data cursor (epoch {}, index {}) is beyond the {} blocks of the corpus "
               "(did the dataset change?)", cursor.epoch, cursor.index, k);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.clear();
}

}  // namespace mt
