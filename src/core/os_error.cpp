// os_error_first (see os_error.h).
#include "core/os_error.h"

#include <cctype>
#include <cstring>

namespace mt {

std::string os_error_first(int errnum) {
  std::string text = std::strerror(errnum);
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

}  // namespace mt
