// Counters that ranks (and threads) publish to each other through shared windows, and waiting on them.
// Invariant: every store a writer made before store_release(c, v) is visible to a reader that has seen
// load_acquire(c) >= v; the counters only grow. C++ atomics on memory shared between processes are
// address-free when lock-free, which the static_assert guarantees.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace mt::dist {

static_assert(std::atomic_ref<int64_t>::is_always_lock_free);

inline int64_t load_acquire(const int64_t& c) {
  return std::atomic_ref<int64_t>(const_cast<int64_t&>(c)).load(std::memory_order_acquire);
}
inline void store_release(int64_t& c, int64_t v) { std::atomic_ref<int64_t>(c).store(v, std::memory_order_release); }

// Spins briefly, then sleeps with a growing pause (up to 200 µs), so waiting ranks give their cores to
// the ranks that share them. Liveness is the launcher's: a rank that dies ends the whole job.
template <typename Ready>
void wait_until(Ready ready) {
  for (int i = 0; i < 4000; ++i) {
    if (ready()) return;
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
  auto pause = std::chrono::microseconds(5);
  while (!ready()) {
    std::this_thread::sleep_for(pause);
    if (pause < std::chrono::microseconds(200)) pause *= 2;
  }
}

}  // namespace mt::dist
