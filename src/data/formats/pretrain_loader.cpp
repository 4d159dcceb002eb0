// append_documents and cut_blocks (see pretrain_loader.h).
#include "data/formats/pretrain_loader.h"

#include <fmt/format.h>

#include "core/error.h"
#include "data/formats/record_files.h"
#include "data/tokenizer.h"

namespace mt {

int64_t append_documents(const DatasetEntry& entry, const Tokenizer& tokenizer, int32_t eos_id, int64_t max_samples,
                         int64_t vocab_size, std::vector<int32_t>& stream) {
  MT_REQUIRE(entry.formatting == "alpaca",
             "dataset '{}': formatting {} has no plain text for training.stage pt; use an alpaca entry whose "
             "columns.prompt names the text column", entry.name, entry.formatting);
  const std::string column = entry.file.extension() == ".txt" && !entry.columns.count("prompt")
                                 ? std::string("text")
                                 : entry.column("prompt");
  int64_t documents = 0;
  for (const JsonRecord& record : read_records(entry.file, entry.name)) {
    if (max_samples > 0 && documents == max_samples) break;
    const std::string where = fmt::format("dataset '{}': {}:{}", entry.name, entry.file.string(), record.line);
    const auto text = record.value.is_object() ? record.value.find(column) : record.value.end();
    MT_REQUIRE(record.value.is_object() && text != record.value.end(),
               "{}: the record has no text column \"{}\" (columns.prompt{})", where, column,
               entry.columns.count("prompt") ? "" : ", LLaMA-Factory's default");
    MT_REQUIRE(text->is_string(), "{}: column \"{}\" must be a string, not {}", where, column, text->type_name());
    for (const int32_t id : tokenizer.encode(text->get<std::string>())) {
      MT_REQUIRE(id >= 0 && id < vocab_size,
                 "{}: token id {} is outside the model's vocab_size {} (the tokenizer does not belong to this model)",
                 where, id, vocab_size);
      stream.push_back(id);
    }
    stream.push_back(eos_id);
    ++documents;
  }
  return documents;
}

std::vector<Example> cut_blocks(const std::vector<int32_t>& stream, int64_t block_size, int64_t* dropped_tokens) {
  MT_ASSERT(block_size >= 2);
  const auto n = static_cast<int64_t>(stream.size());
  std::vector<Example> blocks;
  for (int64_t at = 0; at + block_size <= n; at += block_size) {
    Example e;
    e.input_ids.assign(stream.begin() + at, stream.begin() + at + block_size);
    e.labels = e.input_ids;
    blocks.push_back(std::move(e));
  }
  if (dropped_tokens) *dropped_tokens = n % block_size;
  return blocks;
}

}  // namespace mt
