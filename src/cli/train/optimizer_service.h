// OptimizerService: every rank's optimizer during training. Rank 0's engine submits each step and starts the
// next forward while every rank (rank 0 on its own thread) updates its slices; the weight stream waits per region.
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
  OptimizerService(HostStore& store, const OptimizerSettings& settings);  // collective over the node's ranks
  ~OptimizerService();
  OptimizerService(const OptimizerService&) = delete;
  OptimizerService& operator=(const OptimizerService&) = delete;

  // World rank 0 (the engine's thread).
  void submit(int64_t step, double lr);   // gradients of `step` are in the store; returns at once
  OptimizerReport report();               // the submitted step's norm, clipping and skip, once known
  double last_update_seconds() const { return last_update_seconds_.load(); }  // rank 0's slices, last finished step
  void finish();                          // waits for every rank's last update, then ends every loop
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
  void post(int64_t step, double lr, Message kind);

  HostStore& store_;
  Optimizer optimizer_;
  dist::SharedWindow shared_;
  Mailbox* mailbox_ = nullptr;
  int64_t submitted_ = 0;
  bool stopped_ = false;
  std::thread thread_;                    // rank 0's optimizer loop
  std::mutex mutex_;
  std::condition_variable reported_;
  std::optional<OptimizerReport> report_;
  std::atomic<double> last_update_seconds_{0.0};
  std::atomic<int64_t> consumed_{0};      // rank 0's loop: the last message it has finished with
};

}  // namespace mt
