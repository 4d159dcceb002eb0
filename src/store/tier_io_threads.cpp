// TierIo over a pool of threads calling pread/pwrite (see tier_io.h). Chunks wait in a fixed ring; each thread
// takes one, loops over short transfers, and counts it done in its batch under the pool's lock.
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/os_error.h"
#include "store/tier_io.h"

namespace mt {
namespace {

struct Chunk {
  TierOp op;
  TierBatch* batch = nullptr;
};

std::string describe_failure(const TierOp& op, int64_t at, const std::string& what) {
  return fmt::format("{}: {} of {} bytes at offset {} of {} failed", what, op.write ? "write" : "read", op.bytes, at,
                     op.file ? *op.file : std::string("a tier file"));
}

// One chunk, synchronously; the error text, or empty.
std::string transfer(const TierOp& op) {
  auto* p = static_cast<char*>(op.buffer);
  int64_t done = 0;
  while (done < op.bytes) {
    const ssize_t n = op.write ? pwrite(op.fd, p + done, static_cast<size_t>(op.bytes - done), op.offset + done)
                               : pread(op.fd, p + done, static_cast<size_t>(op.bytes - done), op.offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return describe_failure(op, op.offset + done, os_error_first(errno));
    if (n == 0) return describe_failure(op, op.offset + done, "unexpected end of file");
    done += n;
  }
  return {};
}

class ThreadTierIo final : public TierIo {
 public:
  ThreadTierIo(int threads, std::string reason) : reason_(std::move(reason)) {
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { run(); });
  }
  ~ThreadTierIo() override {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    work_.notify_all();
    for (std::thread& t : workers_) t.join();
  }
  const char* name() const override { return "threads"; }
  std::string fallback_reason() const override { return reason_; }

  void submit(const TierOp& op, TierBatch& batch) override {
    std::lock_guard lock(mutex_);
    for (int64_t at = 0; at < op.bytes; at += kChunkBytes) {
      TierOp part = op;
      part.buffer = static_cast<char*>(op.buffer) + at;
      part.offset = op.offset + at;
      part.bytes = std::min(kChunkBytes, op.bytes - at);
      queue_.push_back({part, &batch});
      ++batch.pending;
    }
    work_.notify_all();
  }

  void wait(TierBatch& batch) override {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return batch.pending == 0; });
    if (!batch.error.empty()) {
      std::string e = std::move(batch.error);
      batch.error.clear();
      throw Error(e);
    }
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      work_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      const Chunk c = queue_.front();
      queue_.pop_front();
      lock.unlock();
      std::string error = transfer(c.op);
      lock.lock();
      if (!error.empty() && c.batch->error.empty()) c.batch->error = std::move(error);
      if (--c.batch->pending == 0) done_.notify_all();
    }
  }

  std::string reason_;
  std::mutex mutex_;
  std::condition_variable work_, done_;
  std::deque<Chunk> queue_;  // grows to the most chunks ever in flight, then reuses its storage
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace

std::unique_ptr<TierIo> make_thread_tier_io(int threads, std::string reason) {
  return std::make_unique<ThreadTierIo>(threads, std::move(reason));
}

}  // namespace mt
