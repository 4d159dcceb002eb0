// DeviceCheckpoints and HostCheckpoints (see checkpoint_store.h).
#include "engine/checkpoint_store.h"

#include "core/error.h"

namespace mt {

DeviceCheckpoints::~DeviceCheckpoints() {
  for (void* p : buffers_) backend_.free_bytes(p);
}

void DeviceCheckpoints::reserve(int64_t count, int64_t bytes) {
  if (static_cast<int64_t>(buffers_.size()) >= count && bytes_ >= bytes) return;
  for (void* p : buffers_) backend_.free_bytes(p);
  buffers_.clear();
  bytes_ = bytes;
  for (int64_t k = 0; k < count; ++k) buffers_.push_back(backend_.alloc_bytes(bytes));
}

HostCheckpoints::~HostCheckpoints() {
  for (void* p : staging_)
    if (p) backend_.free_bytes(p);
}

void HostCheckpoints::reserve(int64_t count, int64_t bytes) {
  if (static_cast<int64_t>(slots_.size()) >= count && bytes_ >= bytes) return;
  for (void*& p : staging_) {
    if (p) backend_.free_bytes(p);
    p = backend_.alloc_bytes(bytes);
  }
  slots_.clear();
  for (int64_t k = 0; k < count; ++k) slots_.push_back(std::make_unique<char[]>(static_cast<size_t>(bytes)));
  written_.assign(static_cast<size_t>(count), 0);
  bytes_ = bytes;
  held_[0] = held_[1] = -1;
}

void* HostCheckpoints::begin_write(int64_t k, int64_t bytes) {
  MT_ASSERT(k >= 0 && k < static_cast<int64_t>(slots_.size()) && bytes <= bytes_,
            "checkpoint {} of {} bytes beyond the {} of {} reserved", k, bytes, slots_.size(), bytes_);
  held_[k % 2] = -1;
  written_[static_cast<size_t>(k)] = bytes;
  return staging_[k % 2];
}

void HostCheckpoints::end_write(int64_t k) {
  const int64_t bytes = written_[static_cast<size_t>(k)];
  backend_.download(slots_[static_cast<size_t>(k)].get(), staging_[k % 2], bytes);
  bytes_moved_ += bytes;
  held_[k % 2] = k;
}

void* HostCheckpoints::acquire(int64_t k) {
  MT_ASSERT(k >= 0 && k < static_cast<int64_t>(slots_.size()), "checkpoint {} beyond the {} reserved", k,
            slots_.size());
  if (held_[k % 2] != k) {
    const int64_t bytes = written_[static_cast<size_t>(k)];
    backend_.upload(staging_[k % 2], slots_[static_cast<size_t>(k)].get(), bytes);
    bytes_moved_ += bytes;
    held_[k % 2] = k;
  }
  return staging_[k % 2];
}

std::unique_ptr<CheckpointStore> make_checkpoint_store(Backend& backend, CheckpointPlacement placement) {
  MT_ASSERT(placement != CheckpointPlacement::automatic, "an engine with its checkpoint placement unresolved");
  if (placement == CheckpointPlacement::host) return std::make_unique<HostCheckpoints>(backend);
  return std::make_unique<DeviceCheckpoints>(backend);
}

}  // namespace mt
