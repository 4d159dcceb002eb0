// Reads .json / .jsonl dataset files into records with their starting lines.
// Invariant: a parse error names the line it happened on; element lines come from one pass over valid JSON text.
#include "data/formats/json_records.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/json_depth.h"
#include "core/regular_file.h"
#include "data/json_message.h"

namespace mt {
namespace {

using nlohmann::ordered_json;

int64_t line_at(const std::string& text, size_t offset) {
  offset = std::min(offset, text.size());
  return 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n');
}

// "parse error at line 3, column 5: ..." -> "parse error at column 5: ..." (the caller names the line in front).
std::string parse_message(const ordered_json::parse_error& e) {
  std::string message = json_message(e);
  const size_t at = message.find("at line ");
  const size_t comma = message.find(", column", at == std::string::npos ? 0 : at);
  if (at != std::string::npos && comma != std::string::npos) message.erase(at + 3, comma + 2 - (at + 3));
  return message;
}

// Start offsets of the top-level elements of a valid JSON array text.
std::vector<size_t> element_offsets(const std::string& text) {
  std::vector<size_t> starts;
  int depth = 0;
  bool in_string = false, escaped = false, expect_element = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
    if (depth == 1 && expect_element && c != ']') {
      starts.push_back(i);
      expect_element = false;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth == 1) expect_element = true;
    } else if (c == ']' || c == '}') --depth;
    else if (c == ',' && depth == 1) expect_element = true;
  }
  return starts;
}

std::vector<JsonRecord> read_array(const std::string& text, const std::string& file) {
  require_json_depth(text, file);
  ordered_json root;
  try {
    root = ordered_json::parse(text);
  } catch (const ordered_json::parse_error& e) {
    throw Error(fmt::format("{}:{}: malformed JSON: {}", file, line_at(text, e.byte == 0 ? 0 : e.byte - 1),
                            parse_message(e)));
  }
  MT_REQUIRE(root.is_array(), "{}: expected a JSON array of records, got {}", file, root.type_name());
  const std::vector<size_t> starts = element_offsets(text);
  MT_ASSERT(starts.size() == root.size(), "{}: {} elements, {} offsets", file, root.size(), starts.size());
  // Offsets ascend: count newlines once, from one element's start to the next.
  std::vector<JsonRecord> records(root.size());
  int64_t line = 1;
  size_t counted = 0;
  for (size_t i = 0; i < root.size(); ++i) {
    line += std::count(text.begin() + static_cast<std::ptrdiff_t>(counted),
                       text.begin() + static_cast<std::ptrdiff_t>(starts[i]), '\n');
    counted = starts[i];
    records[i] = {std::move(root[i]), line};
  }
  return records;
}

std::vector<JsonRecord> read_lines(const std::string& text, const std::string& file) {
  std::vector<JsonRecord> records;
  std::istringstream in(text);
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    require_json_depth(line, fmt::format("{}:{}", file, number));
    try {
      records.push_back({ordered_json::parse(line), number});
    } catch (const ordered_json::parse_error& e) {
      throw Error(fmt::format("{}:{}: malformed JSON: {}", file, number, parse_message(e)));
    }
  }
  return records;
}

}  // namespace

std::vector<JsonRecord> read_json_records(const std::filesystem::path& path, const std::string& dataset) {
  const std::string file = path.string();
  const std::string ext = path.extension().string();
  MT_REQUIRE(ext == ".json" || ext == ".jsonl", "dataset '{}': {}: expected a .json or .jsonl file", dataset, file);
  require_regular_file(path, fmt::format("dataset '{}'", dataset));
  std::ifstream in(path, std::ios::binary);
  MT_REQUIRE(in.good(), "dataset '{}': {}: cannot open", dataset, file);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (ext == ".json" && first != std::string::npos && text[first] == '[') return read_array(text, file);
  return read_lines(text, file);
}

}  // namespace mt
