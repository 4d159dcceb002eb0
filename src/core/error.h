// Errors and check macros shared by every module.
// Invariant: bad user input raises mt::Error with a one-line message naming the thing and the place;
// a broken internal invariant raises mt::Error carrying file:line and the failing statement.
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace mt {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_internal(const char* statement, const char* file, int line, const std::string& detail);

}  // namespace mt

// A user-facing condition: `MT_REQUIRE(n > 0, "config {}: batch_size must be positive", path)`.
#define MT_REQUIRE(cond, ...)                              \
  do {                                                     \
    if (!(cond)) throw ::mt::Error(fmt::format(__VA_ARGS__)); \
  } while (0)

// An internal invariant; the message carries the statement and its location.
#define MT_ASSERT(cond, ...)                                                                  \
  do {                                                                                        \
    if (!(cond)) ::mt::throw_internal(#cond, __FILE__, __LINE__, fmt::format("" __VA_ARGS__)); \
  } while (0)
