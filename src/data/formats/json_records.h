// The records of a text dataset file: a .json file holding one array (or one record per line, as Hugging Face's
// json loader also accepts) or a .jsonl file. Invariant: each record carries the 1-based line where it starts, and
// objects keep their keys in file order (tool descriptions are re-serialised as written).
#pragma once
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mt {

struct JsonRecord {
  nlohmann::ordered_json value;
  int64_t line = 0;
};

// Reads `file` for dataset `dataset`; a missing file, another extension or malformed JSON raise mt::Error naming
// "file:line".
std::vector<JsonRecord> read_json_records(const std::filesystem::path& file, const std::string& dataset);

}  // namespace mt
