// CheckpointStore: where the engine keeps a pass's activation checkpoints between the forward that writes them
// (ascending k) and the backward that reads them (descending k). Implementations: engine/checkpoint_store.h
// (DeviceCheckpoints in backend memory; HostCheckpoints in host slots through kCheckpointStagingBuffers staging
// buffers in backend memory, synchronously, on any backend) and kernels/runtime/host_checkpoints.h (CUDA's
// asynchronous host placement); the memory plan sizes the staging buffers by the same constant.
// Invariants every implementation keeps: a pointer from begin_write(k) or acquire(k) stays valid until release(k) or
// the next begin_write(k + 2); acquire(k) returns checkpoint k exactly as the forward wrote it.
#pragma once
#include <cstdint>

namespace mt {

// Staging buffers in backend memory of the host placement: the checkpoint in use and the next one (checkpoint k is
// staged in buffer k % 2).
inline constexpr int64_t kCheckpointStagingBuffers = 2;

class CheckpointStore {
 public:
  virtual ~CheckpointStore() = default;
  // Room for `count` checkpoints of `bytes` each (reallocated only when either grows).
  virtual void reserve(int64_t count, int64_t bytes) = 0;
  // Forward: backend memory that ops issued after this call write checkpoint k (its first `bytes`) into.
  virtual void* begin_write(int64_t k, int64_t bytes) = 0;
  // Every op writing checkpoint k has been issued.
  virtual void end_write(int64_t k) = 0;
  // Backward: checkpoint k in backend memory, ready for the ops issued after this call.
  virtual void* acquire(int64_t k) = 0;
  // Every op reading checkpoint k has been issued.
  virtual void release(int64_t k) = 0;
  // Bytes copied between backend and host memory so far (both directions; 0 where checkpoints stay put).
  virtual int64_t bytes_moved() const = 0;
};

}  // namespace mt
