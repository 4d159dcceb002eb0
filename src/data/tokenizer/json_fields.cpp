// Field access for the tokenizer.json parsers, with the one-line error messages of json_fields.h.
#include "data/tokenizer/json_fields.h"

#include "core/error.h"

namespace mt::tok {

std::string child(const std::string& where, std::string_view key) {
  // The file name alone (no ": " yet) is the root: its children read "FILE: key".
  if (where.find(": ") == std::string::npos) return fmt::format("{}: {}", where, key);
  return fmt::format("{}.{}", where, key);
}

std::string child(const std::string& where, size_t index) { return fmt::format("{}[{}]", where, index); }

const nlohmann::json& required_field(const nlohmann::json& j, std::string_view key, const std::string& where) {
  MT_REQUIRE(j.is_object(), "{}: expected an object, got {}", where, j.type_name());
  const auto it = j.find(key);
  MT_REQUIRE(it != j.end(), "{}: missing key '{}'", where, key);
  return *it;
}

std::string string_field(const nlohmann::json& j, std::string_view key, const std::string& where) {
  const nlohmann::json& v = required_field(j, key, where);
  MT_REQUIRE(v.is_string(), "{}: expected a string, got {}", child(where, key), v.dump());
  return v.get<std::string>();
}

std::optional<std::string> optional_string(const nlohmann::json& j, std::string_view key, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  MT_REQUIRE(it->is_string(), "{}: expected a string or null, got {}", child(where, key), it->dump());
  return it->get<std::string>();
}

bool bool_field(const nlohmann::json& j, std::string_view key, bool fallback, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  MT_REQUIRE(it->is_boolean(), "{}: expected true or false, got {}", child(where, key), it->dump());
  return it->get<bool>();
}

int64_t int_field(const nlohmann::json& j, std::string_view key, const std::string& where) {
  const nlohmann::json& v = required_field(j, key, where);
  MT_REQUIRE(v.is_number_integer(), "{}: expected an integer, got {}", child(where, key), v.dump());
  return v.get<int64_t>();
}

std::string type_field(const nlohmann::json& j, const std::string& where) { return string_field(j, "type", where); }

}  // namespace mt::tok
