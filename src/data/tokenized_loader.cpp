// Reads tokenized records (.json array or .jsonl), validates them, truncates and drops untrainable ones.
// Invariant: every error names the file and the record's line (or array element) and the key at fault.
#include "data/tokenized_loader.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/json_depth.h"
#include "core/regular_file.h"
#include "data/json_message.h"

namespace mt {
namespace {

using nlohmann::json;

struct TokenizedReader {
  std::string ids_key;
  std::string labels_key;
  int64_t vocab_size;
  int64_t max_seq_len;
  DatasetStats stats;
  std::vector<Example> examples;

  std::vector<int32_t> read_ids(const json& record, const std::string& key, const std::string& where,
                                bool allow_ignore) const {
    const json& value = record.at(key);
    MT_REQUIRE(value.is_array(), "{}: {} must be an array of integers, got {}", where, key, value.type_name());
    std::vector<int32_t> ids;
    ids.reserve(value.size());
    for (size_t i = 0; i < value.size(); ++i) {
      const json& v = value[i];
      MT_REQUIRE(v.is_number_integer(), "{}: {}[{}] = {} is not an integer", where, key, i, v.dump());
      const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() < static_cast<uint64_t>(vocab_size)
                                                   : v.get<int64_t>() >= 0 && v.get<int64_t>() < vocab_size;
      const bool ignored = allow_ignore && !v.is_number_unsigned() && v.get<int64_t>() == kIgnoreIndex;
      MT_REQUIRE(in_range || ignored, "{}: {}[{}] = {} is out of range for vocab_size {}{}", where, key, i,
                 v.dump(), vocab_size, allow_ignore ? " (use -100 to ignore a position)" : "");
      ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
    }
    return ids;
  }

  void add(const json& record, const std::string& where) {
    MT_REQUIRE(record.is_object(), "{}: expected an object, got {}", where, record.type_name());
    MT_REQUIRE(record.contains(ids_key), "{}: missing \"{}\"", where, ids_key);
    Example e;
    e.input_ids = read_ids(record, ids_key, where, false);
    MT_REQUIRE(!e.input_ids.empty(), "{}: {} is empty", where, ids_key);
    if (record.contains(labels_key) && !record[labels_key].is_null()) {
      e.labels = read_ids(record, labels_key, where, true);
      MT_REQUIRE(e.labels.size() == e.input_ids.size(), "{}: {} has {} entries but {} has {}", where, labels_key,
                 e.labels.size(), ids_key, e.input_ids.size());
    } else {
      e.labels = e.input_ids;
    }
    if (static_cast<int64_t>(e.input_ids.size()) > max_seq_len) {
      e.input_ids.resize(static_cast<size_t>(max_seq_len));
      e.labels.resize(static_cast<size_t>(max_seq_len));
      ++stats.truncated;
    }
    // After the shift, labels[0] is never a target.
    if (std::all_of(e.labels.begin() + 1, e.labels.end(), [](int32_t l) { return l == kIgnoreIndex; })) {
      ++stats.dropped;
      return;
    }
    ++stats.examples;
    stats.tokens += static_cast<int64_t>(e.input_ids.size());
    examples.push_back(std::move(e));
  }

  void read_array(const std::string& text, const std::string& file) {
    require_json_depth(text, file);
    json root;
    try {
      root = json::parse(text);
    } catch (const json::parse_error& e) {
      throw Error(fmt::format("{}: malformed JSON: {}", file, json_message(e)));
    }
    MT_REQUIRE(root.is_array(), "{}: expected a JSON array of records, got {}", file, root.type_name());
    for (size_t i = 0; i < root.size(); ++i) add(root[i], fmt::format("{}: element {}", file, i + 1));
  }

  void read_lines(const std::string& text, const std::string& file) {
    std::istringstream in(text);
    std::string line;
    for (int64_t number = 1; std::getline(in, line); ++number) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const std::string where = fmt::format("{}:{}", file, number);
      require_json_depth(line, where);
      json record;
      try {
        record = json::parse(line);
      } catch (const json::parse_error& e) {
        std::string message = json_message(e);
        if (const size_t at = message.find("line 1, column"); at != std::string::npos) message.erase(at, 8);
        throw Error(fmt::format("{}: malformed JSON: {}", where, message));
      }
      add(record, where);
    }
  }
};

}  // namespace

std::vector<Example> load_tokenized(const DatasetEntry& entry, int64_t vocab_size, int64_t max_seq_len,
                                    DatasetStats* stats) {
  MT_ASSERT(vocab_size > 0 && vocab_size <= (int64_t{1} << 31) && max_seq_len > 0);
  const std::string file = entry.file.string();
  const std::string ext = entry.file.extension().string();
  MT_REQUIRE(ext == ".json" || ext == ".jsonl", "dataset '{}': {}: expected a .json or .jsonl file", entry.name,
             file);
  require_regular_file(entry.file, fmt::format("dataset '{}'", entry.name));
  std::ifstream in(entry.file, std::ios::binary);
  MT_REQUIRE(in.good(), "dataset '{}': {}: cannot open", entry.name, file);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();

  TokenizedReader reader{entry.column("input_ids"), entry.column("labels"), vocab_size, max_seq_len, {}, {}};
  // A .json file holds one array, or (as Hugging Face's json loader also accepts) one record per line.
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (ext == ".json" && first != std::string::npos && text[first] == '[') {
    reader.read_array(text, file);
  } else {
    reader.read_lines(text, file);
  }
  if (stats) {
    stats->examples += reader.stats.examples;
    stats->tokens += reader.stats.tokens;
    stats->truncated += reader.stats.truncated;
    stats->dropped += reader.stats.dropped;
  }
  return std::move(reader.examples);
}

}  // namespace mt
