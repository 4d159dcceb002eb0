// HostStore over one MPI-3 shared window (see host_store.h). Window layout, every offset page-aligned:
// per region, master, exp_avg, exp_avg_sq, grad (fp32) and the bf16 copy (those of them in RAM), each padded to a
// multiple of kSliceAlign elements; then the version table, one row of version_stride_ counters per rank.
#include "store/host_store.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/error.h"
#include "dist/check.h"
#include "dist/shared_flags.h"
#include "optim/resident_regions.h"
#include "store/shared_memory_check.h"

namespace mt {
namespace {

int64_t padded(int64_t n) { return (n + HostStore::kSliceAlign - 1) / HostStore::kSliceAlign * HostStore::kSliceAlign; }

// Zeroes with the rank's threads: the first touch that places the pages in the rank's NUMA domain.
void zero_parallel(void* data, int64_t bytes) {
  constexpr int64_t kChunk = 1 << 16;
  auto* p = static_cast<std::byte*>(data);
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < bytes; o += kChunk) std::memset(p + o, 0, static_cast<size_t>(std::min(kChunk, bytes - o)));
}

}  // namespace

HostStore::Slice HostStore::slice_of(int64_t numel, int rank, int ranks) {
  const int64_t chunk = padded((numel + ranks - 1) / ranks);
  const int64_t begin = std::min(numel, rank * chunk);
  return {begin, std::min(numel, begin + chunk)};
}

int64_t HostStore::rank_bytes(int rank) const {
  int64_t n = 0;
  for (const Region& region : layout_.regions) n += slice_of(region.numel, rank, ranks_).size();
  return n * bytes_per_parameter();
}

int64_t HostStore::bytes_per_parameter() const {
  return 4 + (in_ram(StateKind::master) ? 4 : 0) + (in_ram(StateKind::exp_avg) ? 8 : 0) +
         (stream_dtype_ == DType::bf16 ? 2 : 0);
}

HostStore::HostStore(const ParamLayout& layout, DType stream_dtype, const TierSettings& tier)
    : layout_(layout), stream_dtype_(stream_dtype) {
  const dist::Context& ctx = dist::context();
  rank_ = ctx.node_rank;
  ranks_ = ctx.node_size;
  const bool bf16 = stream_dtype_ == DType::bf16;
  MT_REQUIRE(!offloads_master(tier.mode) || bf16,
             "store.offload: optimizer+master keeps no fp32 master in RAM, so the GPU streams the bf16 copy: set "
             "model.stream_dtype to bfloat16 (or auto)");
  if (tier.mode != OffloadMode::none) tier_ = std::make_unique<StateTier>(layout, tier, rank_, ranks_);
  // The kinds in RAM, in window order (kind 3 is the gradient, 4 the bf16 copy).
  std::vector<int> kinds;
  for (int k : {0, 1, 2})
    if (in_ram(static_cast<StateKind>(k))) kinds.push_back(k);
  kinds.push_back(3);
  if (bf16) kinds.push_back(4);

  // Byte offsets of every (region, kind) buffer, then of the version table.
  std::vector<std::vector<int64_t>> offsets(layout_.regions.size());
  int64_t bytes = 0;
  for (size_t r = 0; r < layout_.regions.size(); ++r) {
    const int64_t n = padded(layout_.regions[r].numel);
    for (int k : kinds) {
      offsets[r].push_back(bytes);
      bytes += n * (k < 4 ? 4 : 2);
    }
  }
  version_stride_ = (static_cast<int64_t>(layout_.regions.size()) + 7) / 8 * 8;  // whole cache lines
  const int64_t versions_offset = bytes;
  bytes += 2 * ranks_ * version_stride_ * static_cast<int64_t>(sizeof(int64_t));  // regions, moments

  // Each rank contributes its slices' bytes; rank 0 also the padding and the version table.
  int64_t others = 0;
  for (int q = 1; q < ranks_; ++q) others += rank_bytes(q);
  const int64_t contribution = rank_ == 0 ? bytes - others : rank_bytes(rank_);
  if (ranks_ > 1 && rank_ == 0)
    require_shared_memory(static_cast<uint64_t>(bytes) + dist::page_size(), ranks_);
  window_ = std::make_unique<dist::SharedWindow>(ctx, static_cast<size_t>(contribution));
  MT_ASSERT(window_->bytes() == static_cast<size_t>(bytes));

  std::byte* base = window_->base();
  regions_.resize(layout_.regions.size());
  for (size_t r = 0; r < regions_.size(); ++r) {
    const int64_t n = padded(layout_.regions[r].numel);
    for (size_t i = 0; i < kinds.size(); ++i) {
      std::byte* at = base + offsets[r][i];
      switch (kinds[i]) {
        case 0: regions_[r].master = reinterpret_cast<float*>(at); break;
        case 1: regions_[r].exp_avg = reinterpret_cast<float*>(at); break;
        case 2: regions_[r].exp_avg_sq = reinterpret_cast<float*>(at); break;
        case 3: regions_[r].grad = reinterpret_cast<float*>(at); break;
        default: regions_[r].stream_bf16 = reinterpret_cast<std::uint16_t*>(at); break;
      }
      allocations_.push_back({at, static_cast<size_t>(n * (kinds[i] < 4 ? 4 : 2))});
    }
  }
  versions_ = reinterpret_cast<int64_t*>(base + versions_offset);
  moment_versions_ = versions_ + ranks_ * version_stride_;

  // First touch of this rank's slices (and version row), then nobody touches another rank's pages
  // before they are placed.
  for (int64_t r = 0; r < num_regions(); ++r) {
    const Slice s = slice(r);
    for (float* p : {master(r), exp_avg(r), exp_avg_sq(r), grad(r)})
      if (p) zero_parallel(p + s.begin, s.size() * 4);
    if (bf16) zero_parallel(stream_bf16(r) + s.begin, s.size() * 2);
  }
  for (const int64_t* table : {versions_, moment_versions_})
    zero_parallel(version_row(table, rank_), version_stride_ * static_cast<int64_t>(sizeof(int64_t)));
  MT_CHECK_MPI(MPI_Barrier(ctx.node));
}

HostStore::~HostStore() = default;

int64_t* HostStore::version_row(const int64_t* table, int rank) const {
  return const_cast<int64_t*>(table) + static_cast<int64_t>(rank) * version_stride_;
}

int64_t HostStore::resident_count() const { return resident_ ? resident_->count() : 0; }

void HostStore::sync_resident() {
  if (resident_) resident_->write_back();
}

void HostStore::publish_slice(int64_t r, int64_t version) {
  dist::store_release(version_row(versions_, rank_)[r], version);
}

void HostStore::publish_moments(int64_t r, int64_t version) {
  dist::store_release(version_row(moment_versions_, rank_)[r], version);
}

void HostStore::wait_region(int64_t r, int64_t version) const { wait_versions(versions_, r, version); }

void HostStore::wait_versions(const int64_t* table, int64_t r, int64_t version) const {
  for (int q = 0; q < ranks_; ++q) {
    const int64_t& v = version_row(table, q)[r];
    if (dist::load_acquire(v) >= version) continue;
    const auto t0 = std::chrono::steady_clock::now();
    dist::wait_until([&] { return dist::load_acquire(v) >= version; });
    waited_seconds_.fetch_add(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                              std::memory_order_relaxed);
  }
}

bool HostStore::versions_ready(const int64_t* table, int64_t r, int64_t version) const {
  for (int q = 0; q < ranks_; ++q)
    if (dist::load_acquire(version_row(table, q)[r]) < version) return false;
  return true;
}

void HostStore::refresh_stream_copy(int64_t r) {
  MT_ASSERT(regions_[r].master || stream_dtype_ != DType::bf16, "the master of region {} is not in RAM", r);
  refresh_stream_copy(r, regions_[r].master);
}

float* HostStore::state(int64_t r, StateKind kind) {
  switch (kind) {
    case StateKind::master: return regions_[r].master;
    case StateKind::exp_avg: return regions_[r].exp_avg;
    case StateKind::exp_avg_sq: return regions_[r].exp_avg_sq;
  }
  return nullptr;
}

void HostStore::read_region_state(int64_t r, StateKind kind, float* dst) {
  if (const float* p = state(r, kind)) {
    std::memcpy(dst, p, static_cast<size_t>(numel(r)) * 4);
    return;
  }
  for (int q = 0; q < ranks_; ++q) {
    const Slice s = slice_of(numel(r), q, ranks_);
    if (s.size() > 0) tier_->read_slice(q, r, kind, dst + s.begin);
  }
}

void HostStore::write_region_state(int64_t r, StateKind kind, const float* src) {
  if (float* p = state(r, kind)) {
    std::memcpy(p, src, static_cast<size_t>(numel(r)) * 4);
    return;
  }
  for (int q = 0; q < ranks_; ++q) {
    const Slice s = slice_of(numel(r), q, ranks_);
    if (s.size() > 0) tier_->write_slice(q, r, kind, src + s.begin);
  }
}

const float* HostStore::slice_state(int64_t r, StateKind kind, float* staging) {
  const Slice s = slice(r);
  if (const float* p = state(r, kind)) return p + s.begin;
  if (s.size() > 0) tier_->read_slice(rank_, r, kind, staging);
  return staging;
}

void HostStore::refresh_stream_copy(int64_t r, const float* src) {
  if (stream_dtype_ != DType::bf16) return;
  std::uint16_t* dst = regions_[r].stream_bf16;
  const int64_t n = numel(r);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

}  // namespace mt
