// The dataset registry: <dataset_dir>/dataset_info.json in LLaMA-Factory's format, name -> entry.
// Invariant: entry() returns only validated entries (file_name set, formatting known, columns/tags string maps);
// a broken entry raises its error only when it is asked for, so unrelated entries never block a run.
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace mt {

struct DatasetEntry {
  std::string name;                            // key in dataset_info.json
  std::filesystem::path file;                  // dataset_dir / file_name
  std::string formatting;                      // alpaca (LLaMA-Factory's default) | sharegpt | tokenized
  std::map<std::string, std::string> columns;  // role -> column name in the file ("prompt" -> "instruction", ...)
  std::map<std::string, std::string> tags;     // sharegpt role tags ("role_tag" -> "from", ...)
  bool ranking = false;                        // preference pairs: columns chosen and rejected (training.stage dpo)

  // The file's column for `role`, or `role` itself when the entry does not rename it.
  std::string column(const std::string& role) const;
};

class DatasetRegistry {
 public:
  // Reads <dataset_dir>/dataset_info.json; a missing or malformed file raises mt::Error naming its path.
  explicit DatasetRegistry(const std::filesystem::path& dataset_dir);
  // The entry `name`; an unknown name raises mt::Error listing the available names.
  const DatasetEntry& entry(const std::string& name) const;
  std::vector<std::string> names() const;
  const std::filesystem::path& info_file() const { return info_file_; }

 private:
  std::filesystem::path info_file_;
  std::map<std::string, DatasetEntry> entries_;
  std::map<std::string, std::string> problems_;  // name -> why the entry is unusable
};

}  // namespace mt
