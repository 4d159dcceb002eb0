// Builds the messages of internal-invariant failures (see error.h).
#include "core/error.h"

namespace mt {

void throw_internal(const char* statement, const char* file, int line, const std::string& detail) {
  std::string msg = fmt::format("internal error at {}:{}: `{}` failed", file, line, statement);
  if (!detail.empty()) msg += ": " + detail;
  throw Error(msg);
}

}  // namespace mt
