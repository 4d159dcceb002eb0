// TierIo: asynchronous reads and writes of the state tier's files — io_uring (liburing) where the build has it and
// the kernel allows it, else a pool of threads calling pread/pwrite (also when MEGATRAIN_TIER_IO=threads). An op is
// cut into chunks of kChunkBytes so that one large read keeps several requests in flight on the device.
// Invariants: buffers, lengths and offsets are what the file's open mode requires (page-aligned for O_DIRECT); no
// allocation per op (a fixed table of in-flight chunks); wait() returns only when every op of the batch is complete,
// and throws one mt::Error naming the file, the operation and the system's error when any of them failed (a short
// read past the end of the file is an error). One thread uses a TierIo at a time.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/runtime_switches.h"

namespace mt {

struct TierOp {
  int fd = -1;
  void* buffer = nullptr;
  int64_t bytes = 0;
  int64_t offset = 0;
  bool write = false;
  const std::string* file = nullptr;  // for messages; outlives the op
};

// Ops whose completion is waited for together.
struct TierBatch {
  int64_t pending = 0;     // chunks in flight
  std::string error;       // the first failure, empty while none
};

class TierIo {
 public:
  static constexpr int64_t kChunkBytes = int64_t{4} << 20;
  // io_uring unless the build lacks liburing, the kernel refuses a ring, or `choice` is threads (the tier_io switch).
  static std::unique_ptr<TierIo> create(TierIoChoice choice);
  virtual ~TierIo() = default;
  virtual const char* name() const = 0;   // "io_uring" or "threads"
  virtual std::string fallback_reason() const { return {}; }  // why not io_uring, where it is not
  virtual void submit(const TierOp& op, TierBatch& batch) = 0;
  virtual void wait(TierBatch& batch) = 0;
};

std::unique_ptr<TierIo> make_thread_tier_io(int threads, std::string reason);

}  // namespace mt
