// Rank 0 hands out steps, every rank's loop runs them (see optimizer_service.h).
#include "cli/train/optimizer_service.h"

#include <omp.h>

#include <csignal>
#include <cstdlib>
#include <exception>

#include "core/error.h"
#include "dist/check.h"
#include "dist/shared_flags.h"

namespace mt {

// One cache line in the shared window, written by rank 0's engine thread only.
struct OptimizerService::Mailbox {
  int64_t sequence;   // number of messages posted; published last (release)
  int64_t step;       // the step the message hands out
  int64_t stop;       // 1: leave the loop
  double lr;
  int64_t pad[4];
};

OptimizerService::OptimizerService(HostStore& store, const OptimizerSettings& settings)
    : store_(store), optimizer_(store, settings),
      shared_(dist::context(), store.rank() == 0 ? sizeof(Mailbox) : 0) {
  mailbox_ = reinterpret_cast<Mailbox*>(shared_.base());
  if (store_.rank() == 0) *mailbox_ = Mailbox{};
  MT_CHECK_MPI(MPI_Barrier(dist::context().node));
  if (dist::context().is_root()) {
    const int threads = omp_get_max_threads();
    thread_ = std::thread([this, threads] {
      omp_set_num_threads(threads);  // a new thread starts from the process-wide default
      loop();
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
  if (!stopped_) post(submitted_, 0.0, true);
  thread_.join();
}

void OptimizerService::post(int64_t step, double lr, bool stop) {
  // The previous message has been taken by every loop once every rank has published step-1 everywhere.
  for (int64_t r = 0; r < store_.num_regions(); ++r) store_.wait_region(r, submitted_);
  mailbox_->step = step;
  mailbox_->stop = stop ? 1 : 0;
  mailbox_->lr = lr;
  dist::store_release(mailbox_->sequence, mailbox_->sequence + 1);
  stopped_ = stop;
}

void OptimizerService::submit(int64_t step, double lr) {
  MT_ASSERT(step == submitted_ + 1 && !stopped_, "step {} submitted after {}", step, submitted_);
  {
    std::lock_guard lock(mutex_);
    report_.reset();
  }
  post(step, lr, false);
  submitted_ = step;
  store_.set_required_version(step);  // the next forward reads what this step writes
}

OptimizerReport OptimizerService::report() {
  std::unique_lock lock(mutex_);
  reported_.wait(lock, [&] { return report_.has_value(); });
  return *report_;
}

void OptimizerService::finish() {
  post(submitted_, 0.0, true);  // after every rank's last update (see post)
  if (thread_.joinable()) thread_.join();
}

void OptimizerService::serve() { loop(); }

void OptimizerService::loop() {
  // Test hook (not documented for users): world rank 1 kills itself with SIGKILL when it receives step k.
  const char* die = std::getenv("MEGATRAIN_TEST_DIE_AT_STEP");
  const int64_t die_at = die && dist::context().rank == 1 ? std::atoll(die) : -1;
  try {
    for (int64_t seen = 0;;) {
      const int64_t& sequence = mailbox_->sequence;
      dist::wait_until([&] { return dist::load_acquire(sequence) > seen; });
      seen = dist::load_acquire(sequence);
      if (mailbox_->stop) return;
      if (mailbox_->step == die_at) std::raise(SIGKILL);
      const OptimizerReport done = optimizer_.step(mailbox_->lr, [this](const OptimizerReport& r) {
        if (!dist::context().is_root()) return;
        std::lock_guard lock(mutex_);
        report_ = r;
        reported_.notify_all();
      });
      last_update_seconds_ = done.update_seconds;
    }
  } catch (const std::exception& e) {
    dist::abort_job(e.what());
  }
}

}  // namespace mt
