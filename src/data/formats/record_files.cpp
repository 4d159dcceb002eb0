// read_records: dispatch by extension; the .txt and .csv readers.
// Invariant: a .txt line keeps its text without the line break (\n or \r\n); a .csv row has as many fields as the
// header, quotes may hold commas, doubled quotes and line breaks.
#include "data/formats/record_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace mt {
namespace {

std::string read_whole(const std::filesystem::path& path, const std::string& dataset) {
  std::ifstream in(path, std::ios::binary);
  MT_REQUIRE(in.good() && !std::filesystem::is_directory(path), "dataset '{}': {}: file not found", dataset,
             path.string());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Paragraphs: the text split at every "\n\n", each piece as it stands (the last keeps a final line break), as
// Hugging Face's text builder splits them; a document: the whole text.
std::vector<JsonRecord> read_txt(const std::string& text, TextSample sample_by) {
  std::vector<JsonRecord> records;
  if (sample_by == TextSample::document) return {{nlohmann::ordered_json{{"text", text}}, 1}};
  if (sample_by == TextSample::paragraph) {
    int64_t line = 1;
    for (size_t at = 0;;) {
      const size_t end = text.find("\n\n", at);
      const std::string piece = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
      records.push_back({nlohmann::ordered_json{{"text", piece}}, line});
      if (end == std::string::npos) break;
      line += static_cast<int64_t>(std::count(piece.begin(), piece.end(), '\n')) + 2;
      at = end + 2;
    }
    return records;
  }
  int64_t line = 1;
  for (size_t at = 0; at < text.size(); ++line) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string content = text.substr(at, end - at);
    if (!content.empty() && content.back() == '\r') content.pop_back();
    records.push_back({nlohmann::ordered_json{{"text", content}}, line});
    at = end + 1;
  }
  return records;
}

// One CSV row from `at` (moved past it and its line break); `line` counts the line breaks consumed.
std::vector<std::string> csv_row(const std::string& text, size_t& at, int64_t& line, const std::string& where) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  const int64_t start = line;
  for (; at < text.size(); ++at) {
    const char c = text[at];
    if (quoted) {
      if (c == '"' && at + 1 < text.size() && text[at + 1] == '"') {
        fields.back() += '"';
        ++at;
      } else if (c == '"') {
        quoted = false;
      } else {
        if (c == '\n') ++line;
        fields.back() += c;
      }
    } else if (c == '"') {
      MT_REQUIRE(fields.back().empty(), "{}:{}: a quote inside an unquoted CSV field", where, line);
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && at + 1 < text.size() && text[at + 1] == '\n') ++at;
      ++at;
      ++line;
      return fields;
    } else {
      fields.back() += c;
    }
  }
  MT_REQUIRE(!quoted, "{}:{}: a quoted CSV field is never closed", where, start);
  ++line;
  return fields;
}

std::vector<JsonRecord> read_csv(const std::string& text, const std::string& where) {
  size_t at = 0;
  int64_t line = 1;
  MT_REQUIRE(!text.empty(), "{}: empty CSV file (it needs a header row)", where);
  const std::vector<std::string> header = csv_row(text, at, line, where);
  std::vector<JsonRecord> records;
  while (at < text.size()) {
    const int64_t start = line;
    const std::vector<std::string> fields = csv_row(text, at, line, where);
    if (fields.size() == 1 && fields[0].empty()) continue;  // a blank line
    MT_REQUIRE(fields.size() == header.size(), "{}:{}: {} fields, but the header names {} columns", where, start,
               fields.size(), header.size());
    nlohmann::ordered_json record = nlohmann::ordered_json::object();
    for (size_t k = 0; k < header.size(); ++k) record[header[k]] = fields[k];
    records.push_back({std::move(record), start});
  }
  return records;
}

}  // namespace

TextSample text_sample_from_name(const std::string& name) {
  if (name == "paragraph") return TextSample::paragraph;
  if (name == "document") return TextSample::document;
  MT_REQUIRE(name == "line", "dataset.sample_by must be line, paragraph or document, not '{}'", name);
  return TextSample::line;
}

std::vector<JsonRecord> read_records(const std::filesystem::path& path, const std::string& dataset,
                                     TextSample sample_by) {
  const std::string ext = path.extension().string();
  if (ext == ".json" || ext == ".jsonl") return read_json_records(path, dataset);
  MT_REQUIRE(ext == ".txt" || ext == ".csv", "dataset '{}': {}: expected a .json, .jsonl, .txt or .csv file", dataset,
             path.string());
  const std::string text = read_whole(path, dataset);
  if (ext == ".txt") return read_txt(text, sample_by);
  return read_csv(text, fmt::format("dataset '{}': {}", dataset, path.string()));
}

}  // namespace mt
