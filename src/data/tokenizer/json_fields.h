// Typed reads of tokenizer.json fields. Invariant: a missing or mistyped field raises mt::Error naming the file
// and the JSON path (`where` is "FILE" at the root, "FILE: section.path" below); optional fields give their
// default when absent or null.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mt::tok {

const nlohmann::json& required_field(const nlohmann::json& j, std::string_view key, const std::string& where);
std::string string_field(const nlohmann::json& j, std::string_view key, const std::string& where);
std::optional<std::string> optional_string(const nlohmann::json& j, std::string_view key, const std::string& where);
bool bool_field(const nlohmann::json& j, std::string_view key, bool fallback, const std::string& where);
int64_t int_field(const nlohmann::json& j, std::string_view key, const std::string& where);
// The "type" of a component object (normalizer, pre_tokenizer, ...).
std::string type_field(const nlohmann::json& j, const std::string& where);
// `where` extended by a key or an index: "FILE: a", "FILE: a.b", "FILE: a.b[2]".
std::string child(const std::string& where, std::string_view key);
std::string child(const std::string& where, size_t index);

}  // namespace mt::tok
