// TierIo over io_uring (see tier_io.h): one ring of kDepth entries; chunks take a slot of a fixed table, their
// completions are reaped while submitting (when the ring is full) and in wait(); a short transfer resubmits its rest.
// Without liburing at build time, or where the kernel refuses a ring, create() returns the thread pool.
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/os_error.h"
#include "store/tier_io.h"

#if MEGATRAIN_HAVE_LIBURING
#include <liburing.h>
#endif

namespace mt {
namespace {

constexpr int kThreads = 8;

#if MEGATRAIN_HAVE_LIBURING
constexpr unsigned kDepth = 64;

class UringTierIo final : public TierIo {
 public:
  explicit UringTierIo(io_uring ring) : ring_(ring), slots_(kDepth) {
    for (unsigned i = 0; i < kDepth; ++i) free_.push_back(kDepth - 1 - i);
  }
  ~UringTierIo() override {
    while (in_flight_ > 0) reap(true);
    io_uring_queue_exit(&ring_);
  }
  const char* name() const override { return "io_uring"; }

  void submit(const TierOp& op, TierBatch& batch) override {
    for (int64_t at = 0; at < op.bytes; at += kChunkBytes) {
      TierOp part = op;
      part.buffer = static_cast<char*>(op.buffer) + at;
      part.offset = op.offset + at;
      part.bytes = std::min(kChunkBytes, op.bytes - at);
      while (free_.empty()) reap(true);
      const unsigned s = free_.back();
      free_.pop_back();
      slots_[s] = {part, &batch};
      ++batch.pending;
      queue(s);
    }
    io_uring_submit(&ring_);
  }

  void wait(TierBatch& batch) override {
    while (batch.pending > 0) reap(true);
    if (!batch.error.empty()) {
      std::string e = std::move(batch.error);
      batch.error.clear();
      throw Error(e);
    }
  }

 private:
  struct Slot {
    TierOp op;
    TierBatch* batch = nullptr;
  };

  void queue(unsigned s) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    while (!sqe) {  // the submission queue is full: hand it to the kernel
      io_uring_submit(&ring_);
      sqe = io_uring_get_sqe(&ring_);
    }
    const TierOp& op = slots_[s].op;
    if (op.write)
      io_uring_prep_write(sqe, op.fd, op.buffer, static_cast<unsigned>(op.bytes), static_cast<__u64>(op.offset));
    else
      io_uring_prep_read(sqe, op.fd, op.buffer, static_cast<unsigned>(op.bytes), static_cast<__u64>(op.offset));
    io_uring_sqe_set_data64(sqe, s);
    ++in_flight_;
  }

  void reap(bool block) {
    io_uring_cqe* cqe = nullptr;
    const int rc = block ? io_uring_submit_and_wait(&ring_, 1) : 0;
    if (rc < 0 && rc != -EINTR) throw Error(fmt::format("io_uring: submit failed: {}", std::strerror(-rc)));
    while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
      const auto s = static_cast<unsigned>(io_uring_cqe_get_data64(cqe));
      const int res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      --in_flight_;
      finish(s, res);
    }
  }

  void finish(unsigned s, int res) {
    Slot& slot = slots_[s];
    TierOp& op = slot.op;
    if (res == -EINTR || res == -EAGAIN) {
      queue(s);
      io_uring_submit(&ring_);
      return;
    }
    if (res > 0 && res < op.bytes) {  // short: the rest again
      op.buffer = static_cast<char*>(op.buffer) + res;
      op.offset += res;
      op.bytes -= res;
      queue(s);
      io_uring_submit(&ring_);
      return;
    }
    if (res <= 0 && slot.batch->error.empty())
      slot.batch->error = fmt::format("{}: {} of {} bytes at offset {} of {} failed",
                                      res == 0 ? "unexpected end of file" : os_error_first(-res),
                                      op.write ? "write" : "read", op.bytes, op.offset,
                                      op.file ? *op.file : std::string("a tier file"));
    --slot.batch->pending;
    free_.push_back(s);
  }

  io_uring ring_;
  std::vector<Slot> slots_;
  std::vector<unsigned> free_;
  int64_t in_flight_ = 0;
};
#endif

}  // namespace

std::unique_ptr<TierIo> TierIo::create(TierIoChoice choice) {
  if (choice == TierIoChoice::threads)
    return make_thread_tier_io(kThreads, "MEGATRAIN_TIER_IO=threads");
#if MEGATRAIN_HAVE_LIBURING
  io_uring ring;
  const int rc = io_uring_queue_init(kDepth, &ring, 0);
  if (rc == 0) return std::make_unique<UringTierIo>(ring);
  return make_thread_tier_io(kThreads, fmt::format("the kernel refused an io_uring ring: {}", std::strerror(-rc)));
#else
  return make_thread_tier_io(kThreads, "built without liburing");
#endif
}

}  // namespace mt
