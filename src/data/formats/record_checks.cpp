// The loaders' shared checks and counts (see record_checks.h).
#include "data/formats/record_checks.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "data/batch.h"

namespace mt {

void add_stats(const DatasetStats& part, DatasetStats* stats) {
  if (!stats) return;
  stats->examples += part.examples;
  stats->tokens += part.tokens;
  stats->truncated += part.truncated;
  stats->dropped += part.dropped;
  stats->skipped += part.skipped;
}

std::vector<int32_t> token_id_column(const nlohmann::ordered_json& record, const std::string& key,
                                     const std::string& where, int64_t vocab_size, bool labels) {
  const auto it = record.find(key);
  MT_REQUIRE(it != record.end() && it->is_array() && !it->empty(), "{}: \"{}\" must be a non-empty array of token ids",
             where, key);
  std::vector<int32_t> ids;
  for (size_t i = 0; i < it->size(); ++i) {
    const nlohmann::ordered_json& v = (*it)[i];
    const bool ok = v.is_number_integer() && ((labels && v.get<int64_t>() == kIgnoreIndex) ||
                                              (v.get<int64_t>() >= 0 && v.get<int64_t>() < vocab_size));
    MT_REQUIRE(ok, "{}: {}[{}] = {} is not a token id below vocab_size {}{}", where, key, i, v.dump(), vocab_size,
               labels ? " or -100" : "");
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return ids;
}

void require_in_vocab(const std::vector<int32_t>& ids, int64_t vocab_size, const std::string& where) {
  for (const int32_t id : ids)
    MT_REQUIRE(id >= 0 && id < vocab_size,
               "{}: token id {} is outside the model's vocab_size {} (the tokenizer does not belong to this model)",
               where, id, vocab_size);
}

bool keep_two_sequences(const std::vector<int32_t>& first_ids, const std::vector<int32_t>& first_labels,
                        const std::vector<int32_t>& second_ids, const std::vector<int32_t>& second_labels,
                        bool truncated, DatasetStats& part) {
  if (truncated) ++part.truncated;
  const auto trained = [](const std::vector<int32_t>& labels) {
    return labels.size() >= 2 &&
           std::any_of(labels.begin() + 1, labels.end(), [](int32_t l) { return l != kIgnoreIndex; });
  };
  if (!trained(first_labels) || !trained(second_labels)) {
    ++part.dropped;
    return false;
  }
  ++part.examples;
  part.tokens += static_cast<int64_t>(first_ids.size() + second_ids.size());
  return true;
}

bool cut_to(int64_t max_seq_len, std::initializer_list<std::vector<int32_t>*> sequences) {
  bool cut = false;
  for (std::vector<int32_t>* v : sequences)
    if (static_cast<int64_t>(v->size()) > max_seq_len) {
      v->resize(static_cast<size_t>(max_seq_len));
      cut = true;
    }
  return cut;
}

void SkippedRecords::add(const ConvertedRecord& skipped, const DatasetEntry& entry, int64_t line) {
  auto& [count, first] = categories_[skipped.skip_category];
  if (count++ == 0) first = fmt::format("{}:{} ({})", entry.file.string(), line, skipped.skip_detail);
  ++count_;
}

void SkippedRecords::warn(const DatasetEntry& entry, size_t records) const {
  if (categories_.empty()) return;
  std::string summary;
  for (const auto& [category, tally] : categories_)
    summary += fmt::format("{}{} {} (first at {})", summary.empty() ? "" : "; ", tally.first, category, tally.second);
  log::warn("dataset '{}': skipped {} of {} records: {}", entry.name, count_, records, summary);
}

}  // namespace mt
