// The distributed optimizer step (see optimizer.h). Regions are visited in layout order, which is the
// order the forward pass reads them; slots inside a region in layout order.
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
  const bool fused = settings_.passes == UpdatePasses::fused;
  auto slots = [&](int64_t r, const auto& update) {
    const HostStore::Slice s = store_.slice(r);
    for (const ParamSlot& slot : store_.layout().regions[static_cast<size_t>(r)].params) {
      const int64_t begin = std::max(slot.offset, s.begin), end = std::min(slot.offset + slot.numel, s.end);
      if (!report.skipped && begin < end) update(slot, begin, end);
    }
  };
  for (int64_t r = 0; r < store_.num_regions(); ++r) {
    std::uint16_t* bf16 = store_.stream_bf16(r);
    slots(r, [&](const ParamSlot& slot, int64_t begin, int64_t end) {
      float *p = store_.master(r) + begin, *m = store_.exp_avg(r) + begin, *v = store_.exp_avg_sq(r) + begin;
      const float* g = store_.grad(r) + begin;
      std::uint16_t* copy = bf16 ? bf16 + begin : nullptr;
      if (fused)
        adamw_update(p, m, v, g, end - begin, hp, slot.weight_decay, copy);
      else
        adamw_params(p, m, v, g, end - begin, hp, slot.weight_decay, copy);
    });
    store_.publish_slice(r, passes_);
    if (fused) store_.publish_moments(r, passes_);
  }
  report.update_seconds = seconds_since(t1);
  if (fused) return report;
  const auto t2 = std::chrono::steady_clock::now();
  for (int64_t r = store_.num_regions() - 1; r >= 0; --r) {
    slots(r, [&](const ParamSlot&, int64_t begin, int64_t end) {
      adamw_moments(store_.exp_avg(r) + begin, store_.exp_avg_sq(r) + begin, store_.grad(r) + begin, end - begin, hp);
    });
    store_.publish_moments(r, passes_);
  }
  report.moments_seconds = seconds_since(t2);
  return report;
}

}  // namespace mt
