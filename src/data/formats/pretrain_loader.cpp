// pretrain_tokens, append_documents and cut_blocks (see pretrain_loader.h).
#include "data/formats/pretrain_loader.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_depth.h"
#include "data/formats/record_files.h"
#include "data/templates/chat_template.h"
#include "data/tokenizer.h"

namespace mt {
namespace {

// tokenizer_config.json's add_bos_token (what transformers 4's Llama / Gemma tokenizers expose and LLaMA-Factory reads).
bool adds_bos(const std::filesystem::path& dir) {
  const std::filesystem::path file = dir / "tokenizer_config.json";
  if (dir.empty() || !std::filesystem::is_regular_file(file)) return false;
  std::ifstream in(file, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  require_json_depth(text, file.string());
  const nlohmann::json config = nlohmann::json::parse(text, nullptr, false);
  return config.is_object() && config.contains("add_bos_token") && config["add_bos_token"] == true;
}

}  // namespace

PretrainTokens pretrain_tokens(const std::string& template_name, const Tokenizer& tokenizer,
                               const std::filesystem::path& tokenizer_dir) {
  PretrainTokens t;
  auto token = [&](const std::string& text, const std::string& rule) {
    const std::optional<int32_t> id = tokenizer.token_to_id(text);
    MT_REQUIRE(id.has_value(), "training.stage pt: {} appends {} to each document, but the tokenizer has no such token",
               rule, text);
    t.eos_source = rule + " " + text;
    return *id;
  };
  if (template_name == "llama3") {
    t.eos = token("<|end_of_text|>", "dataset.template llama3");
  } else if (template_name != "auto" && template_name != "jinja" &&
             find_chat_template(template_name).replace_eos) {
    t.eos = token(find_chat_template(template_name).stop_words.at(0),
                  fmt::format("dataset.template {} (its EOS)", template_name));
  } else {
    const std::optional<int32_t> eos = tokenizer.eos_id();
    MT_REQUIRE(eos.has_value(), "training.stage pt appends the EOS token to each document, but the tokenizer has no "
               "eos_token (tokenizer_config.json)");
    t.eos = *eos;
    t.eos_source = "the tokenizer's eos_token";
  }
  if (adds_bos(tokenizer_dir)) {
    t.bos = tokenizer.bos_id();
    MT_REQUIRE(t.bos.has_value(), "training.stage pt: tokenizer_config.json sets add_bos_token, but there is no "
               "bos_token");
  }
  return t;
}

int64_t append_documents(const DatasetEntry& entry, const Tokenizer& tokenizer, int32_t eos_id, int64_t max_samples,
                         int64_t vocab_size, std::vector<int32_t>& stream, std::vector<size_t>& document_ends,
                         TextSample sample_by) {
  MT_REQUIRE(entry.formatting == "alpaca",
             "dataset '{}': formatting {} has no plain text for training.stage pt; use an alpaca entry whose "
             "columns.prompt names the text column", entry.name, entry.formatting);
  const std::string column = entry.file.extension() == ".txt" && !entry.columns.count("prompt")
                                 ? std::string("text")
                                 : entry.column("prompt");
  int64_t documents = 0;
  for (const JsonRecord& record : read_records(entry.file, entry.name, sample_by)) {
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
    document_ends.push_back(stream.size());
    ++documents;
  }
  return documents;
}

std::vector<Example> cut_blocks(const std::vector<int32_t>& stream, const std::vector<size_t>& document_ends,
                                int64_t batch_documents, int64_t block_size, std::optional<int32_t> bos,
                                int64_t* dropped_tokens) {
  MT_ASSERT(block_size >= 2 && batch_documents >= 0);
  std::vector<Example> blocks;
  int64_t dropped = 0;
  auto cut = [&](size_t begin, size_t end) {
    size_t at = begin;
    for (; at + static_cast<size_t>(block_size) <= end; at += static_cast<size_t>(block_size)) {
      Example e;
      e.input_ids.assign(stream.begin() + static_cast<std::ptrdiff_t>(at),
                         stream.begin() + static_cast<std::ptrdiff_t>(at) + block_size);
      if (bos) e.input_ids[0] = *bos;
      e.labels = e.input_ids;
      blocks.push_back(std::move(e));
    }
    dropped += static_cast<int64_t>(end - at);
  };
  if (batch_documents == 0) {
    cut(0, stream.size());
  } else {
    size_t begin = 0;
    for (size_t d = 0; d < document_ends.size(); d += static_cast<size_t>(batch_documents)) {
      const size_t last = std::min(document_ends.size(), d + static_cast<size_t>(batch_documents)) - 1;
      cut(begin, document_ends[last]);
      begin = document_ends[last];
    }
  }
  if (dropped_tokens) *dropped_tokens = dropped;
  return blocks;
}

}  // namespace mt
