// Errors and check macros shared by every module.
// Invariant: bad user input raises mt::Error with a one-line message naming the thing and the place;
// a broken internal invariant raises mt::Error carrying file:line and the failing statement.
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>

#if defined(__CUDACC__)
#include <sstream>
#else
#include <fmt/format.h>
#endif

namespace mt {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_internal(const char* statement, const char* file, int line, const std::string& detail);

#if defined(__CUDACC__)
// nvcc cannot compile fmt's C++20 headers: CUDA translation units format messages with this small
// stand-in, where every "{...}" takes the next argument as an ostream writes it (format specs are ignored).
namespace detail {
inline void brace_format_rest(std::ostringstream& out, std::string_view f) { out << f; }
template <typename First, typename... Rest>
void brace_format_rest(std::ostringstream& out, std::string_view f, const First& first, const Rest&... rest) {
  const auto open = f.find('{');
  if (open == std::string_view::npos) {
    out << f;
    return;
  }
  const auto close = f.find('}', open);
  out << f.substr(0, open) << first;
  brace_format_rest(out, close == std::string_view::npos ? std::string_view{} : f.substr(close + 1), rest...);
}
}  // namespace detail
template <typename... Args>
std::string brace_format(std::string_view f, const Args&... args) {
  std::ostringstream out;
  detail::brace_format_rest(out, f, args...);
  return out.str();
}
#endif

}  // namespace mt

#if defined(__CUDACC__)
#define MT_FORMAT(...) ::mt::brace_format(__VA_ARGS__)
#else
#define MT_FORMAT(...) fmt::format(__VA_ARGS__)
#endif

// A user-facing condition: `MT_REQUIRE(n > 0, "config {}: batch_size must be positive", path)`.
#define MT_REQUIRE(cond, ...)                              \
  do {                                                     \
    if (!(cond)) throw ::mt::Error(MT_FORMAT(__VA_ARGS__)); \
  } while (0)

// An internal invariant; the message carries the statement and its location.
#define MT_ASSERT(cond, ...)                                                                  \
  do {                                                                                        \
    if (!(cond)) ::mt::throw_internal(#cond, __FILE__, __LINE__, MT_FORMAT("" __VA_ARGS__)); \
  } while (0)
