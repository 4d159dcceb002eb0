// The distributed optimizer step (see optimizer.h). Regions are visited in layout order, which is the
// order the forward pass reads them; inside a region its runs of slots that decay alike, in layout order.
#include "optim/optimizer.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "dist/check.h"
#include "dist/shared_flags.h"
#include "optim/adamw.h"
#include "optim/grad_clip.h"
#include "optim/resident_regions.h"

namespace mt {
namespace {

constexpr int64_t kBlock = HostStore::kSliceAlign;
constexpr int64_t kCounterStride = 8;   // one cache line per rank's counter

std::size_t shared_bytes(const HostStore& store, int64_t blocks) {
  return static_cast<std::size_t>(2 * blocks) * sizeof(double) +
         static_cast<std::size_t>(store.ranks() * kCounterStride) * sizeof(int64_t);
}

int64_t blocks_of(const HostStore& store) {
  int64_t n = 0;
  for (int64_t r = 0; r < store.num_regions(); ++r) n += (store.numel(r) + kBlock - 1) / kBlock;
  return n;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

Optimizer::Optimizer(HostStore& store, const OptimizerSettings& settings)
    : store_(store), settings_(settings), blocks_(blocks_of(store)),
      shared_(dist::context(), store.rank() == 0 ? shared_bytes(store, blocks_of(store)) : 0) {
  for (int64_t r = 0, b = 0; r < store_.num_regions(); ++r) {
    first_block_.push_back(b);
    b += (store_.numel(r) + kBlock - 1) / kBlock;
    runs_.push_back(decay_runs(store_.layout().regions[static_cast<size_t>(r)]));
  }
  partials_ = reinterpret_cast<double*>(shared_.base());
  partials_done_ = reinterpret_cast<int64_t*>(shared_.base() + 2 * blocks_ * static_cast<int64_t>(sizeof(double)));
  partials_done_[store_.rank() * kCounterStride] = 0;
  MT_CHECK_MPI(MPI_Barrier(dist::context().node));
}

double Optimizer::global_sum_of_squares(const double* partials) const {
  // Per region in block order (threads over regions), then over regions in order: a fixed order.
  const int64_t R = store_.num_regions();
  std::vector<double> region_sums(static_cast<size_t>(R), 0.0);
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t r = 0; r < R; ++r) {
    const int64_t end = r + 1 < R ? first_block_[static_cast<size_t>(r) + 1] : blocks_;
    double s = 0.0;
    for (int64_t b = first_block_[static_cast<size_t>(r)]; b < end; ++b) s += partials[b];
    region_sums[static_cast<size_t>(r)] = s;
  }
  double total = 0.0;
  for (double s : region_sums) total += s;
  return total;
}

OptimizerReport Optimizer::step(double lr, const std::function<void(const OptimizerReport&)>& on_norm,
                                std::optional<double> sum_of_squares) {
  const auto t0 = std::chrono::steady_clock::now();
  OptimizerReport report;
  report.pass = ++passes_;
  double* partials = partials_ + (passes_ % 2) * blocks_;

  MT_ASSERT(store_.resident_count() == 0 || sum_of_squares,
            "the gradients of GPU-resident regions stay on the GPU: their Σg² must be given");
  // 1. Σ g² of this rank's blocks; then wait for every rank's (unless given).
  for (int64_t r = 0; r < store_.num_regions() && !sum_of_squares; ++r) {
    const HostStore::Slice s = store_.slice(r);
    const float* g = store_.grad(r);
    const int64_t n = store_.numel(r), first = first_block_[static_cast<size_t>(r)];
#pragma omp parallel for schedule(static)
    for (int64_t b = s.begin / kBlock; b < (s.end + kBlock - 1) / kBlock; ++b)
      partials[first + b] = block_sum_of_squares(g + b * kBlock, std::min(kBlock, n - b * kBlock));
  }
  dist::store_release(partials_done_[store_.rank() * kCounterStride], passes_);
  for (int q = 0; q < store_.ranks() && !sum_of_squares; ++q) {
    const int64_t& done = partials_done_[q * kCounterStride];
    dist::wait_until([&] { return dist::load_acquire(done) >= passes_; });
  }
  report.grad_norm = std::sqrt(sum_of_squares ? *sum_of_squares : global_sum_of_squares(partials));
  report.skipped = !std::isfinite(report.grad_norm);
  report.clip_coefficient = report.skipped ? 1.0f : clip_coefficient(report.grad_norm, settings_.max_grad_norm);
  report.norm_seconds = seconds_since(t0);
  if (on_norm) on_norm(report);

  // 2. AdamW on this rank's slices, region by region in forward order, each published when done.
  const auto t1 = std::chrono::steady_clock::now();
  AdamWStep hp;
  if (!report.skipped) {
    hp.lr = lr;
    hp.beta1 = settings_.beta1;
    hp.beta2 = settings_.beta2;
    hp.eps = settings_.eps;
    hp.weight_decay = settings_.weight_decay;
    hp.step = ++updates_;
    hp.grad_scale = report.clip_coefficient;
  }
  // Parameters region by region in forward order, each published as soon as it is done (the next forward waits
  // for them); split: then the Adam moments in reverse order (the next backward overwrites gradients from the
  // last layer on, and waits for each region's moments).
  if (store_.tier()) {
    update_over_tier(hp, report.skipped);
    report.update_seconds = seconds_since(t1);
    return report;
  }
  const bool fused = settings_.passes == UpdatePasses::fused;
  auto runs = [&](int64_t r, const auto& update) {
    const HostStore::Slice s = store_.slice(r);
    for (const DecayRun& run : runs_[static_cast<size_t>(r)]) {
      const int64_t begin = std::max(run.begin, s.begin), end = std::min(run.end, s.end);
      if (!report.skipped && begin < end) update(run.weight_decay, begin, end);
    }
  };
  // Regions a device holds (optim/resident_regions.h) lead the forward order: their updates go out first, published
  // as they are handed out (the device orders its readers after them; the store's copy follows by sync_resident).
  ResidentRegions* resident = store_.resident();
  const int64_t first_host = store_.resident_count();
  MT_ASSERT(first_host == 0 || store_.ranks() == 1, "GPU-resident regions with {} ranks on the node", store_.ranks());
  for (int64_t r = 0; r < first_host; ++r) {
    resident->update(r, hp, report.skipped, passes_);
    store_.publish_slice(r, passes_);
    store_.publish_moments(r, passes_);
  }
  for (int64_t r = first_host; r < store_.num_regions(); ++r) {
    std::uint16_t* bf16 = store_.stream_bf16(r);
    runs(r, [&](bool decay, int64_t begin, int64_t end) {
      float *p = store_.master(r) + begin, *m = store_.exp_avg(r) + begin, *v = store_.exp_avg_sq(r) + begin;
      const float* g = store_.grad(r) + begin;
      std::uint16_t* copy = bf16 ? bf16 + begin : nullptr;
      if (fused)
        adamw_update(p, m, v, g, end - begin, hp, decay, copy);
      else
        adamw_params(p, m, v, g, end - begin, hp, decay, copy);
    });
    store_.publish_slice(r, passes_);
    if (fused) store_.publish_moments(r, passes_);
  }
  report.update_seconds = seconds_since(t1);
  const auto t2 = std::chrono::steady_clock::now();
  for (int64_t r = store_.num_regions() - 1; r >= first_host && !fused; --r) {
    runs(r, [&](bool, int64_t begin, int64_t end) {
      adamw_moments(store_.exp_avg(r) + begin, store_.exp_avg_sq(r) + begin, store_.grad(r) + begin, end - begin, hp);
    });
    store_.publish_moments(r, passes_);
  }
  if (!fused) report.moments_seconds = seconds_since(t2);
  return report;
}

}  // namespace mt

namespace mt {

// One fused pass over this rank's tier units in forward order (optim/optimizer.h): unit u+1's state is read while u
// is updated and u-1 written back, through the tier's three staging buffers; a region is published (parameters and
// moments: its gradient has been read) once its last unit is updated, before its state is back on the device.
void Optimizer::update_over_tier(const AdamWStep& hp, bool skipped) {
  StateTier& tier = *store_.tier();
  const std::vector<TierUnit>& units = tier.units().units;
  int64_t published = 0;  // regions [0, published) are out
  auto publish_until = [&](int64_t end) {
    for (; published < end; ++published) {
      store_.publish_slice(published, passes_);
      store_.publish_moments(published, passes_);
    }
  };
  if (skipped || units.empty()) {
    publish_until(store_.num_regions());
    return;
  }
  const int master_part = tier.part_of(StateKind::master), m_part = tier.part_of(StateKind::exp_avg),
            v_part = tier.part_of(StateKind::exp_avg_sq);
  constexpr int kBuffers = StateTier::kStaging;
  tier.start_read(0, 0);
  for (size_t u = 0; u < units.size(); ++u) {
    const int b = static_cast<int>(u % kBuffers);
    if (u + 1 < units.size()) {
      const int next = static_cast<int>((u + 1) % kBuffers);
      tier.wait(next);  // unit u+1-kBuffers's write back has left the buffer
      tier.start_read(u + 1, next);
    }
    tier.wait(b);
    const TierUnit& unit = units[u];
    publish_until(unit.region);
    float* staged = tier.staging(b);
    float* m = staged + m_part * unit.kind_stride;
    float* v = staged + v_part * unit.kind_stride;
    float* p = master_part >= 0 ? staged + master_part * unit.kind_stride : store_.master(unit.region) + unit.begin;
    const float* g = store_.grad(unit.region) + unit.begin;
    std::uint16_t* copy = store_.stream_bf16(unit.region);
    for (const DecayRun& run : runs_[static_cast<size_t>(unit.region)]) {
      const int64_t begin = std::max(run.begin, unit.begin), end = std::min(run.end, unit.end);
      if (begin >= end) continue;
      const int64_t at = begin - unit.begin;
      adamw_update(p + at, m + at, v + at, g + at, end - begin, hp, run.weight_decay, copy ? copy + begin : nullptr);
    }
    if (u + 1 == units.size() || units[u + 1].region != unit.region) publish_until(unit.region + 1);
    tier.start_write(u, b);
  }
  for (int b = 0; b < kBuffers; ++b) tier.wait(b);
  publish_until(store_.num_regions());
}

}  // namespace mt
