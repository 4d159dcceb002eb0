// The records of any dataset file LLaMA-Factory reads locally: .json / .jsonl (json_records.h), .txt (one record
// {"text": ...} per line, as Hugging Face's text loader makes them by default; per blank-line-separated paragraph, or
// the whole file as one, as its sample_by "paragraph" / "document" do) and .csv (a header row naming the columns,
// then one record per row; RFC 4180 quoting, every value a string).
// Invariant: each record carries its 1-based starting line; a malformed file raises mt::Error naming "file:line".
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "data/formats/json_records.h"

namespace mt {

// How a .txt file splits into records (Hugging Face datasets' text builder's sample_by).
enum class TextSample { line, paragraph, document };
TextSample text_sample_from_name(const std::string& name);  // "line" | "paragraph" | "document"

std::vector<JsonRecord> read_records(const std::filesystem::path& file, const std::string& dataset,
                                     TextSample sample_by = TextSample::line);

}  // namespace mt
