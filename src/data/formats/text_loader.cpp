// load_text: read records, convert, render, truncate, count; one skip summary per dataset.
// Invariant: every error message starts with "dataset '<name>': <file>:<line>:" or names the missing column.
#include "data/formats/text_loader.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/error.h"
#include "core/log.h"
#include "data/formats/record_files.h"
#include "data/formats/record_converter.h"
#include "data/formats/truncation.h"

namespace mt {
namespace {

struct SkipTally {
  int64_t count = 0;
  std::string first;  // "file:line (detail)"
};

void require_columns(const DatasetEntry& entry, const RecordConverter& converter,
                     const std::vector<JsonRecord>& records) {
  if (records.empty()) return;
  for (const auto& [role, name] : converter.columns()) {
    const bool present = std::any_of(records.begin(), records.end(), [&](const JsonRecord& r) {
      return r.value.is_object() && r.value.contains(name);
    });
    MT_REQUIRE(present,
               "dataset '{}': {}: no record has the column \"{}\" (columns.{}{}); set \"columns\" in "
               "dataset_info.json",
               entry.name, entry.file.string(), name, role, entry.columns.empty() ? ", LLaMA-Factory's default" : "");
  }
}

}  // namespace

std::vector<Example> load_text(const DatasetEntry& entry, const TemplateRenderer& renderer, const TextLimits& limits,
                               DatasetStats* stats) {
  MT_ASSERT(limits.max_seq_len > 0 && limits.vocab_size > 0);
  MT_REQUIRE(!limits.train_on_prompt || !renderer.efficient_eos(),
             "dataset.train_on_prompt: the chat template '{}' does not support it (its answers end with an "
             "efficient EOS, as in LLaMA-Factory, which refuses this too)",
             renderer.chat_template().name);
  const RecordConverter converter(entry);
  const std::vector<JsonRecord> records = read_records(entry.file, entry.name);
  require_columns(entry, converter, records);

  std::vector<Example> examples;
  DatasetStats part;
  std::map<std::string, SkipTally> skips;
  for (const JsonRecord& record : records) {
    const std::string where = fmt::format("{}:{}", entry.file.string(), record.line);
    ConvertedRecord converted;
    std::vector<EncodedPair> pairs;
    try {
      converted = converter.convert(record.value);
      if (converted.conversation) pairs = renderer.encode(*converted.conversation);
    } catch (const Error& e) {
      throw Error(fmt::format("dataset '{}': {}: {}", entry.name, where, e.what()));
    }
    if (!converted.conversation) {
      SkipTally& tally = skips[converted.skip_category];
      if (tally.count++ == 0) tally.first = fmt::format("{} ({})", where, converted.skip_detail);
      ++part.skipped;
      continue;
    }
    bool truncated = false;
    Example e =
        assemble_example(pairs, limits.max_seq_len, limits.train_on_prompt, &truncated, renderer.efficient_eos());
    for (const int32_t id : e.input_ids)
      MT_REQUIRE(id >= 0 && id < limits.vocab_size,
                 "dataset '{}': {}: token id {} is outside the model's vocab_size {} (the tokenizer does not belong "
                 "to this model)",
                 entry.name, where, id, limits.vocab_size);
    if (truncated) ++part.truncated;
    if (e.labels.size() < 2 ||
        std::all_of(e.labels.begin() + 1, e.labels.end(), [](int32_t l) { return l == kIgnoreIndex; })) {
      ++part.dropped;
      continue;
    }
    ++part.examples;
    part.tokens += static_cast<int64_t>(e.input_ids.size());
    examples.push_back(std::move(e));
  }
  if (!skips.empty()) {
    std::string summary;
    for (const auto& [category, tally] : skips)
      summary += fmt::format("{}{} {} (first at {})", summary.empty() ? "" : "; ", tally.count, category, tally.first);
    log::warn("dataset '{}': skipped {} of {} records: {}", entry.name, part.skipped, records.size(), summary);
  }
  if (stats) {
    stats->examples += part.examples;
    stats->tokens += part.tokens;
    stats->truncated += part.truncated;
    stats->dropped += part.dropped;
    stats->skipped += part.skipped;
  }
  return examples;
}

}  // namespace mt
