// KTO examples: records -> (conversation, kto_tag) -> chat template -> the KL shift -> truncation (see kto_loader.h).
// Invariant: every error names "dataset '<name>': <file>:<line>:".
#include "data/formats/kto_loader.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "core/error.h"
#include "data/formats/pairwise_loader.h"
#include "data/formats/record_checks.h"
#include "data/formats/record_converter.h"
#include "data/formats/record_files.h"
#include "data/formats/truncation.h"

namespace mt {
namespace {

using nlohmann::ordered_json;

std::string tag_column(const DatasetEntry& entry) {
  const auto it = entry.columns.find("kto_tag");
  MT_REQUIRE(it != entry.columns.end() && !it->second.empty(),
             "dataset '{}': training.stage kto needs columns.kto_tag (the desirable / undesirable label) in "
             "dataset_info.json", entry.name);
  return it->second;
}

// The record's kto_tag: true or false, else an error naming the column and the value.
bool kto_tag_of(const ordered_json& record, const std::string& column) {
  const auto it = record.is_object() ? record.find(column) : record.end();
  const bool present = it != record.end();
  MT_REQUIRE(present && it->is_boolean(), "column \"{}\" (kto_tag) must be true or false, got {}", column,
             present ? it->dump() : std::string("nothing"));
  return it->get<bool>();
}

// prompt + response cut by infer_seqlen into (ids, labels).
void assemble(const std::vector<int32_t>& prompt, const std::vector<int32_t>& response, int64_t cutoff,
              std::vector<int32_t>& ids, std::vector<int32_t>& labels, bool& truncated) {
  const auto [source, target] =
      infer_seqlen(static_cast<int64_t>(prompt.size()), static_cast<int64_t>(response.size()), cutoff);
  const auto n_source = static_cast<size_t>(source), n_target = static_cast<size_t>(target);
  truncated = truncated || n_source < prompt.size() || n_target < response.size();
  ids.assign(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(n_source));
  ids.insert(ids.end(), response.begin(), response.begin() + static_cast<std::ptrdiff_t>(n_target));
  labels.assign(n_source, kIgnoreIndex);
  labels.insert(labels.end(), response.begin(), response.begin() + static_cast<std::ptrdiff_t>(n_target));
}

}  // namespace

std::vector<KtoRecord> read_kto_records(const DatasetEntry& entry, int64_t max_records, DatasetStats* stats) {
  const std::string tag = tag_column(entry);
  DatasetEntry sft = entry;  // the record as an SFT record: the tag is read here
  sft.columns.erase("kto_tag");
  const RecordConverter converter(sft);
  std::vector<JsonRecord> records = read_records(entry.file, entry.name);
  if (max_records > 0 && static_cast<int64_t>(records.size()) > max_records)
    records.resize(static_cast<size_t>(max_records));
  SkippedRecords skips;
  std::vector<KtoRecord> converted;
  for (const JsonRecord& record : records) {
    const std::string where = fmt::format("dataset '{}': {}:{}", entry.name, entry.file.string(), record.line);
    try {
      const bool desirable = kto_tag_of(record.value, tag);
      ConvertedRecord c = converter.convert(record.value);
      if (!c.conversation) {
        skips.add(c, entry, record.line);
        continue;
      }
      MT_REQUIRE(!c.conversation->turns.back().content.empty(), "the answer is empty");
      converted.push_back({std::move(*c.conversation), desirable, where});
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", where, e.what()));
    }
  }
  DatasetStats part;
  part.skipped = skips.count();
  skips.warn(entry, records.size());
  add_stats(part, stats);
  return converted;
}

std::vector<Example> shifted_kto_examples(const std::vector<KtoRecord>& merged, size_t first, size_t count,
                                          int64_t shift_block, const TemplateRenderer& renderer,
                                          const TextLimits& limits, DatasetStats* stats) {
  MT_ASSERT(limits.max_seq_len > 0 && limits.vocab_size > 0 && first + count <= merged.size() && shift_block > 0);
  const auto block = static_cast<size_t>(shift_block);
  DatasetStats part;
  std::vector<Example> examples;
  for (size_t i = first; i < first + count; ++i) {
    const KtoRecord& r = merged[i];
    const size_t block_first = i / block * block, block_last = std::min(merged.size(), block_first + block) - 1;
    Conversation kl = r.conversation;  // the same prompt, the previous record's answer
    kl.turns.back() = merged[i == block_first ? block_last : i - 1].conversation.turns.back();
    auto [prompt, response] = one_turn(renderer.encode(r.conversation));
    auto [kl_prompt, kl_response] = one_turn(renderer.encode(kl));
    if (const std::optional<int32_t> eos = renderer.efficient_eos()) {  // LLaMA-Factory appends it before cutting
      response.push_back(*eos);
      kl_response.push_back(*eos);
    }
    Example e;
    e.desirable = r.desirable;
    bool truncated = false;
    assemble(prompt, response, limits.max_seq_len, e.input_ids, e.labels, truncated);
    assemble(kl_prompt, kl_response, limits.max_seq_len, e.kl_ids, e.kl_labels, truncated);
    require_in_vocab(e.input_ids, limits.vocab_size, r.where);
    require_in_vocab(e.kl_ids, limits.vocab_size, r.where);
    if (keep_two_sequences(e.input_ids, e.labels, e.kl_ids, e.kl_labels, truncated, part))
      examples.push_back(std::move(e));
  }
  add_stats(part, stats);
  return examples;
}

std::vector<Example> load_kto_tokenized(const DatasetEntry& entry, int64_t vocab_size, int64_t max_seq_len,
                                        DatasetStats* stats) {
  MT_ASSERT(vocab_size > 0 && max_seq_len > 0);
  const std::string tag = tag_column(entry);
  const std::vector<JsonRecord> records = read_records(entry.file, entry.name);
  std::vector<Example> examples;
  DatasetStats part;
  for (const JsonRecord& record : records) {
    const std::string where = fmt::format("dataset '{}': {}:{}", entry.name, entry.file.string(), record.line);
    MT_REQUIRE(record.value.is_object(), "{}: expected an object, got {}", where, record.value.type_name());
    auto ids_of = [&](const std::string& role, bool labels) {
      return token_id_column(record.value, entry.column(role), where, vocab_size, labels);
    };
    Example e;
    try {
      e.desirable = kto_tag_of(record.value, tag);
    } catch (const Error& error) {
      throw Error(fmt::format("{}: {}", where, error.what()));
    }
    e.input_ids = ids_of("input_ids", false);
    e.labels = ids_of("labels", true);
    e.kl_ids = ids_of("kl_input_ids", false);
    e.kl_labels = ids_of("kl_labels", true);
    MT_REQUIRE(e.labels.size() == e.input_ids.size() && e.kl_labels.size() == e.kl_ids.size(),
               "{}: each sequence's labels must be as long as its input ids", where);
    const bool truncated = cut_to(max_seq_len, {&e.input_ids, &e.labels, &e.kl_ids, &e.kl_labels});
    if (keep_two_sequences(e.input_ids, e.labels, e.kl_ids, e.kl_labels, truncated, part))
      examples.push_back(std::move(e));
  }
  add_stats(part, stats);
  return examples;
}

}  // namespace mt
