// The node's rank 0 hands out steps, every rank's loop runs them (see optimizer_service.h).
#include "cli/runtime/optimizer_service.h"

#include <omp.h>

#include <csignal>
#include <cstdlib>
#include <exception>

#include "core/error.h"
#include "core/fault_hooks.h"
#include "dist/check.h"
#include "dist/shared_flags.h"

namespace mt {

// One cache line in the shared window, written by node rank 0's engine thread only.
struct OptimizerService::Mailbox {
  int64_t sequence;   // number of messages posted; published last (release)
  int64_t step;       // the step the message hands out
  int64_t kind;       // Message: a step, leave the loop, or a checkpoint
  double lr;
  int64_t has_sum_of_squares;  // the step's Σg² is given (computed on the GPU): no host norm pass
  double sum_of_squares;
  int64_t pad[2];
};

OptimizerService::OptimizerService(HostStore& store, const OptimizerSettings& settings, bool computes,
                                   std::function<void()> on_checkpoint)
    : store_(store), optimizer_(store, settings),
      shared_(dist::context(), store.rank() == 0 ? sizeof(Mailbox) : 0), drives_(store.rank() == 0) {
  mailbox_ = reinterpret_cast<Mailbox*>(shared_.base());
  if (drives_) *mailbox_ = Mailbox{};
  MT_CHECK_MPI(MPI_Barrier(dist::context().node));
  MT_ASSERT(computes || !drives_, "the node's rank 0 runs an engine");
  if (computes) {
    const int threads = omp_get_max_threads();
    thread_ = std::thread([this, threads, on_checkpoint = std::move(on_checkpoint)] {
      omp_set_num_threads(threads);  // a new thread starts from the process-wide default
      loop(on_checkpoint, {});
    });
  }
}

OptimizerService::~OptimizerService() {
  if (!thread_.joinable()) return;
  // Unwinding a job of several ranks: it is about to be aborted, and the loop may wait for ranks that
  // never come; leave the thread to the abort. Otherwise end the loop and join it.
  if (std::uncaught_exceptions() > 0 && store_.ranks() > 1) {
    thread_.detach();
    return;
  }
  if (drives_ && !stopped_) post(submitted_, 0.0, Message::stop);
  thread_.join();
}

void OptimizerService::wait_finished() {
  MT_ASSERT(!drives_, "the node's rank 0 ends the loops with finish()");
  if (thread_.joinable()) thread_.join();
}

void OptimizerService::post(int64_t step, double lr, Message kind, std::optional<double> sum_of_squares) {
  MT_ASSERT(drives_, "only the node's rank 0 posts optimizer messages");
  // The previous message has been taken by every loop once every rank has published step-1 everywhere (a
  // checkpoint ends collectively on the other ranks) and rank 0's loop has finished with it.
  for (int64_t r = 0; r < store_.num_regions(); ++r) store_.wait_region(r, submitted_);
  if (thread_.joinable()) dist::wait_until([&] { return consumed_.load() >= mailbox_->sequence; });
  mailbox_->step = step;
  mailbox_->kind = static_cast<int64_t>(kind);
  mailbox_->lr = lr;
  mailbox_->has_sum_of_squares = sum_of_squares ? 1 : 0;
  mailbox_->sum_of_squares = sum_of_squares.value_or(0.0);
  dist::store_release(mailbox_->sequence, mailbox_->sequence + 1);
  stopped_ = kind == Message::stop;
}

void OptimizerService::submit(int64_t step, double lr, std::optional<double> sum_of_squares) {
  MT_ASSERT(step == submitted_ + 1 && !stopped_, "step {} submitted after {}", step, submitted_);
  {
    std::lock_guard lock(mutex_);
    report_.reset();
  }
  post(step, lr, Message::step, sum_of_squares);
  submitted_ = step;
  store_.set_required_version(step);  // the next forward reads what this step writes
}

OptimizerReport OptimizerService::report() {
  std::unique_lock lock(mutex_);
  reported_.wait(lock, [&] { return report_.has_value(); });
  return *report_;
}

void OptimizerService::finish() {
  post(submitted_, 0.0, Message::stop);  // after every rank's last update (see post)
  if (thread_.joinable()) thread_.join();
}

void OptimizerService::checkpoint(const std::function<void()>& save) {
  post(submitted_, 0.0, Message::checkpoint);
  save();
}

void OptimizerService::serve(const std::function<void()>& on_checkpoint,
                             const std::function<void()>& before_test_kill) {
  loop(on_checkpoint, before_test_kill);
}

void OptimizerService::loop(const std::function<void()>& on_checkpoint, const std::function<void()>& before_test_kill) {
  // Test hook (core/fault_hooks.h): world rank 1 kills itself with SIGKILL when it receives step k (once a
  // checkpoint written in the background has completed, so the test knows which checkpoints exist).
  const int64_t die_at = dist::context().rank == 1 ? fault_hooks().die_at_step : -1;
  try {
    for (int64_t seen = 0;;) {
      const int64_t& sequence = mailbox_->sequence;
      dist::wait_until([&] { return dist::load_acquire(sequence) > seen; });
      seen = dist::load_acquire(sequence);
      const auto kind = static_cast<Message>(mailbox_->kind);
      if (kind == Message::stop) return;
      if (kind == Message::checkpoint) {
        if (on_checkpoint) on_checkpoint();  // the other ranks; node rank 0's main thread saves for itself
        consumed_.store(seen);
        continue;
      }
      if (mailbox_->step == die_at) {
        if (before_test_kill) before_test_kill();
        std::raise(SIGKILL);
      }
      const std::optional<double> given =
          mailbox_->has_sum_of_squares ? std::optional<double>(mailbox_->sum_of_squares) : std::nullopt;
      const OptimizerReport done = optimizer_.step(
          mailbox_->lr,
          [this](const OptimizerReport& r) {
            if (!drives_) return;
            std::lock_guard lock(mutex_);
            report_ = r;
            reported_.notify_all();
          },
          given);
      last_update_seconds_ = done.update_seconds;
      last_moments_seconds_ = done.moments_seconds;
      consumed_.store(seen);
    }
  } catch (const std::exception& e) {
    dist::abort_job(e.what());
  }
}

}  // namespace mt
