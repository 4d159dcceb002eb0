// The operating system's error as the first words of a message ("no space left on device: writing ..."): what went
// wrong first, then where. Invariant: the text is strerror's, its first letter lowercased, nothing else changed.
#pragma once
#include <string>

namespace mt {

std::string os_error_first(int errnum);

}  // namespace mt
