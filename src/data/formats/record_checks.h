// The checks and counts the pair and KTO loaders share: their stats added up, a tokenized record's id column read,
// the token ids checked against the vocabulary, and the skipped records tallied into one warning.
// Invariant: every error names `where` ("dataset '<name>': <file>:<line>") and the offending key or value.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"
#include "data/dataset_registry.h"
#include "data/formats/record_converter.h"

namespace mt {

// part's counts added to *stats (null: none).
void add_stats(const DatasetStats& part, DatasetStats* stats);

// A tokenized record's column `key` as token ids below vocab_size (labels: or −100), else mt::Error naming `where`,
// the key, the index and the value.
std::vector<int32_t> token_id_column(const nlohmann::ordered_json& record, const std::string& key,
                                     const std::string& where, int64_t vocab_size, bool labels);

// Every id of a rendered sequence below vocab_size, else mt::Error (the tokenizer does not belong to the model).
void require_in_vocab(const std::vector<int32_t>& ids, int64_t vocab_size, const std::string& where);

// A pair's or KTO example's two sequences, (ids, labels) each: counted into `part` (truncated, tokens, examples) and
// true, or counted as dropped and false where either has no trained token left after the label shift.
bool keep_two_sequences(const std::vector<int32_t>& first_ids, const std::vector<int32_t>& first_labels,
                        const std::vector<int32_t>& second_ids, const std::vector<int32_t>& second_labels,
                        bool truncated, DatasetStats& part);

// Each of a tokenized record's sequences cut to max_seq_len; true where any was longer.
bool cut_to(int64_t max_seq_len, std::initializer_list<std::vector<int32_t>*> sequences);

// Records that are no conversation, by category, each with its first place; one warning for the dataset.
class SkippedRecords {
 public:
  void add(const ConvertedRecord& skipped, const DatasetEntry& entry, int64_t line);
  int64_t count() const { return count_; }
  void warn(const DatasetEntry& entry, size_t records) const;

 private:
  std::map<std::string, std::pair<int64_t, std::string>> categories_;  // category -> (count, first place)
  int64_t count_ = 0;
};

}  // namespace mt
