// RecordConverter: one alpaca or sharegpt record -> a Conversation, with LLaMA-Factory's columns, tags and defaults.
// Invariant: a record is converted, or skipped with a reason; a field of the wrong JSON type raises mt::Error naming
// the field (the loader prefixes file:line).
#pragma once
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset_registry.h"
#include "data/formats/conversation.h"

namespace mt {

struct ConvertedRecord {
  std::optional<Conversation> conversation;
  std::string skip_category;   // set when skipped: "empty conversation", "unknown role", ...
  std::string skip_detail;     // what exactly, for the first-offender report
};

class RecordConverter {
 public:
  // Resolves entry's columns and tags; unknown or misplaced keys raise mt::Error naming the entry and the key.
  explicit RecordConverter(const DatasetEntry& entry);
  ConvertedRecord convert(const nlohmann::ordered_json& record) const;
  // (role, file column) of every column this entry reads; each must occur in at least one record of the file.
  const std::vector<std::pair<std::string, std::string>>& columns() const { return columns_; }

 private:
  ConvertedRecord convert_alpaca(const nlohmann::ordered_json& record) const;
  ConvertedRecord convert_sharegpt(const nlohmann::ordered_json& record) const;
  std::string column(const std::string& role) const;  // "" when this entry does not read `role`
  std::string tag(const std::string& name) const;      // "" when unset

  bool sharegpt_ = false;
  std::vector<std::pair<std::string, std::string>> columns_;
  std::vector<std::pair<std::string, std::string>> tags_;
};

}  // namespace mt
