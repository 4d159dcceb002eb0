// OptimizerService: every rank's optimizer during training. The node's rank 0 submits each step and starts the
// next forward while every rank of the node updates its slices — ranks that run an engine (compute ranks) on
// their own thread, the others on their main thread (serve); weight streams wait per region.
// Invariants: steps go out in order through a shared-memory mailbox, one at a time (submit(k) first waits until
// every rank has finished step k-1); after finish() every rank has applied every step and left its loop.
// A checkpoint message runs the save on every rank at once (collective), between two steps; it ends with a
// collective call on every rank (the synchronous write, or the barrier after the snapshot of a background one).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "dist/shared_window.h"
#include "optim/optimizer.h"
#include "store/host_store.h"

namespace mt {

class OptimizerService {
 public:
  // Collective over the node's ranks. A compute rank runs its loop on a thread, calling on_checkpoint for each
  // checkpoint message when it is not the node's rank 0 (which saves on its main thread).
  OptimizerService(HostStore& store, const OptimizerSettings& settings, bool computes,
                   std::function<void()> on_checkpoint = {});
  ~OptimizerService();
  OptimizerService(const OptimizerService&) = delete;
  OptimizerService& operator=(const OptimizerService&) = delete;

  // The node's rank 0 (the engine's thread).
  // Gradients of `step` are in the store; returns at once. sum_of_squares: their Σg² where the engine knows it.
  void submit(int64_t step, double lr, std::optional<double> sum_of_squares = std::nullopt);
  OptimizerReport report();               // the submitted step's norm, clipping and skip, once known
  double last_update_seconds() const { return last_update_seconds_.load(); }  // rank 0's slices, last finished step
  double last_moments_seconds() const { return last_moments_seconds_.load(); }  // its moments pass (split passes)
  void finish();                          // waits for every rank's last update, then ends every loop
  // Other compute ranks: the next forward reads the store after `updates` updates (the steps submitted so far).
  void expect_updates(int64_t updates) { store_.set_required_version(updates); }
  void wait_finished();                   // until the node's rank 0 has called finish()
  // After every rank's last update: every other rank runs its serve() on_checkpoint while this rank runs save.
  void checkpoint(const std::function<void()>& save);
  int64_t updates_applied() const { return optimizer_.updates_applied(); }   // with every rank idle
  void set_updates_applied(int64_t n) { optimizer_.set_updates_applied(n); } // before the first step (resume)

  // Every other rank: runs the steps rank 0 submits, and on_checkpoint for each checkpoint, until finish().
  // before_test_kill runs before the MEGATRAIN_TEST_DIE_AT_STEP hook kills the rank.
  void serve(const std::function<void()>& on_checkpoint, const std::function<void()>& before_test_kill = {});

 private:
  struct Mailbox;
  enum class Message : int64_t { step = 0, stop = 1, checkpoint = 2 };
  void loop(const std::function<void()>& on_checkpoint, const std::function<void()>& before_test_kill);
  void post(int64_t step, double lr, Message kind, std::optional<double> sum_of_squares = std::nullopt);

  HostStore& store_;
  Optimizer optimizer_;
  dist::SharedWindow shared_;
  Mailbox* mailbox_ = nullptr;
  int64_t submitted_ = 0;
  bool stopped_ = false;
  bool drives_ = false;                   // node rank 0: posts the messages
  std::thread thread_;                    // a compute rank's optimizer loop
  std::mutex mutex_;
  std::condition_variable reported_;
  std::optional<OptimizerReport> report_;
  std::atomic<double> last_update_seconds_{0.0};
  std::atomic<double> last_moments_seconds_{0.0};
  std::atomic<int64_t> consumed_{0};      // the thread's loop: the last message it has finished with
};

}  // namespace mt
