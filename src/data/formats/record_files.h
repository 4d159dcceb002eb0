// The records of any dataset file LLaMA-Factory reads locally: .json / .jsonl (json_records.h), .txt (one record
// {"text": line} per line, as Hugging Face's text loader makes them) and .csv (a header row naming the columns, then
// one record per row; RFC 4180 quoting, every value a string).
// Invariant: each record carries its 1-based starting line; a malformed file raises mt::Error naming "file:line".
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "data/formats/json_records.h"

namespace mt {

std::vector<JsonRecord> read_records(const std::filesystem::path& file, const std::string& dataset);

}  // namespace mt
