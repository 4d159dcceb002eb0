// The stop-signal handler and its flag (see stop_signal.h).
#include "core/stop_signal.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>

namespace mt::stop_signal {
namespace {

std::atomic<int> first_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler stores to this flag");
bool stopped = false;
char partial_path[4096] = {};
std::atomic<bool> partial_set{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the signal handler loads this flag");

void say(const char* text) {
  const ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

extern "C" void on_stop_signal(int signo) {
  int expected = 0;
  if (first_signal.compare_exchange_strong(expected, signo)) {
    say("megatrain: stop requested: finishing the current step, then a checkpoint (a second signal ends at once)\n");
    return;
  }
  say("megatrain: second stop signal: ending now\n");
  if (partial_set.load() && ::unlink(partial_path) == 0) {
    say("megatrain: removed the partial checkpoint ");
    say(partial_path);
    say("\n");
  }
  std::signal(signo, SIG_DFL);
  std::raise(signo);
}

}  // namespace

void install() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // blocking reads and writes go on; the loop polls the flag between steps
  for (const int signo : {SIGTERM, SIGINT, SIGUSR1}) sigaction(signo, &action, nullptr);
}

int requested() { return first_signal.load(std::memory_order_relaxed); }

void mark_stopped() { stopped = true; }

int exit_status() { return stopped ? kExitStoppedForRequeue : 0; }

void partial_file_begin(const char* path) {
  partial_set.store(false);
  if (std::strlen(path) >= sizeof(partial_path)) return;
  std::strcpy(partial_path, path);
  partial_set.store(true);
}

void partial_file_end() { partial_set.store(false); }

}  // namespace mt::stop_signal
