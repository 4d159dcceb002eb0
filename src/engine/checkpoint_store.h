// The checkpoint stores any backend runs (the interface and its invariants: transfer/checkpoint_store.h): where
// the engine keeps a pass's activation checkpoints between the forward that writes them (ascending k) and the
// backward that reads them (descending k). DeviceCheckpoints keeps every checkpoint in backend memory.
// HostCheckpoints keeps them in host slots and holds two pass-sized staging buffers in backend memory: checkpoint k
// is written into and read from staging buffer k % 2, so while the backward works from one the other receives the
// checkpoint it needs next; its copies go through the backend interface (upload, download), synchronously, so any
// backend runs the path (the CPU test exercises it). The CUDA backend's asynchronous version (page-locked slots, a
// copy stream, events) is kernels/runtime/host_checkpoints.h.
// Invariants: the interface's; HostCheckpoints stages checkpoint k in buffer k % kCheckpointStagingBuffers.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "engine/checkpoint_placement.h"
#include "transfer/checkpoint_store.h"

namespace mt {

class DeviceCheckpoints final : public CheckpointStore {
 public:
  explicit DeviceCheckpoints(Backend& backend) : backend_(backend) {}
  ~DeviceCheckpoints() override;
  DeviceCheckpoints(const DeviceCheckpoints&) = delete;
  DeviceCheckpoints& operator=(const DeviceCheckpoints&) = delete;

  void reserve(int64_t count, int64_t bytes) override;
  void* begin_write(int64_t k, int64_t) override { return buffers_.at(static_cast<size_t>(k)); }
  void end_write(int64_t) override {}
  void* acquire(int64_t k) override { return buffers_.at(static_cast<size_t>(k)); }
  void release(int64_t) override {}
  int64_t bytes_moved() const override { return 0; }

 private:
  Backend& backend_;
  std::vector<void*> buffers_;
  int64_t bytes_ = 0;
};

class HostCheckpoints final : public CheckpointStore {
 public:
  explicit HostCheckpoints(Backend& backend) : backend_(backend) {}
  ~HostCheckpoints() override;
  HostCheckpoints(const HostCheckpoints&) = delete;
  HostCheckpoints& operator=(const HostCheckpoints&) = delete;

  void reserve(int64_t count, int64_t bytes) override;
  void* begin_write(int64_t k, int64_t bytes) override;
  void end_write(int64_t k) override;
  void* acquire(int64_t k) override;
  void release(int64_t) override {}
  int64_t bytes_moved() const override { return bytes_moved_; }

 private:
  Backend& backend_;
  std::vector<std::unique_ptr<char[]>> slots_;  // host memory, one per checkpoint
  std::vector<int64_t> written_;                // bytes of each slot the forward wrote
  void* staging_[kCheckpointStagingBuffers] = {};  // backend memory
  int64_t held_[kCheckpointStagingBuffers] = {-1, -1};  // the checkpoint each staging buffer holds (-1: none)
  int64_t bytes_ = 0;
  int64_t bytes_moved_ = 0;
};

// The store for `placement` (gpu or host) on any backend (CUDA's asynchronous host store is
// kernels/runtime/host_checkpoints.h's).
std::unique_ptr<CheckpointStore> make_checkpoint_store(Backend& backend, CheckpointPlacement placement);

}  // namespace mt
