// Short, one-line text of nlohmann-json errors for user-facing messages.
// Invariant: the result never carries the library's "[json.exception...]" prefix.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace mt {

// "parse error at line 1, column 5: syntax error ..." from the exception's text.
std::string json_message(const nlohmann::json::exception& e);

}  // namespace mt
