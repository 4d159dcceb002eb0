// Logging sink: stderr, elapsed seconds since the first message, level filter.
#include "core/log.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <mutex>

namespace mt::log {
namespace {
Level g_level = Level::info;
std::mutex g_mutex;
const auto g_start = std::chrono::steady_clock::now();
const bool g_terminal = isatty(STDERR_FILENO) == 1;
bool g_status_shown = false;
}  // namespace

void set_level(Level level) { g_level = level; }
bool enabled(Level level) { return static_cast<int>(level) >= static_cast<int>(g_level); }

void write(Level level, std::string_view text) {
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - g_start).count();
  const char* tag = level == Level::warn ? " warning:" : "";
  std::lock_guard lock(g_mutex);
  if (g_status_shown) fmt::print(stderr, "\r\033[K");
  g_status_shown = false;
  fmt::print(stderr, "[{:8.2f}s]{} {}\n", t, tag, text);
  std::fflush(stderr);
}

void status(std::string_view text) {
  if (!g_terminal) return;
  std::lock_guard lock(g_mutex);
  fmt::print(stderr, "\r\033[K{}", text);
  g_status_shown = true;
  std::fflush(stderr);
}

}  // namespace mt::log
