// Progress and diagnostic logging to stderr, one line per call, prefixed by the elapsed time.
// Invariant: the only place the program writes human-oriented progress text.
#pragma once
#include <fmt/format.h>

#include <string_view>

namespace mt::log {

enum class Level { debug, info, warn };
void set_level(Level level);
bool enabled(Level level);
void write(Level level, std::string_view text);
// On a terminal, a live one-line status at the bottom (replaced by the next status, cleared by the next
// message); elsewhere nothing, so batch logs keep one plain line per message.
void status(std::string_view text);

template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::info)) write(Level::info, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::warn)) write(Level::warn, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::debug)) write(Level::debug, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace mt::log
