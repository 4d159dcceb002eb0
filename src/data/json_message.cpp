// Strips nlohmann-json's exception-id prefix from its messages.
// Invariant: the message text after the prefix is kept unchanged.
#include "data/json_message.h"

namespace mt {

std::string json_message(const nlohmann::json::exception& e) {
  const std::string text = e.what();
  const size_t end = text.find("] ");
  return text.rfind("[json.exception", 0) == 0 && end != std::string::npos ? text.substr(end + 2) : text;
}

}  // namespace mt
