// Optimizer: one update of the host store by every rank of the node on its own slices (exact global norm,
// clipping, AdamW with decay on matrices, the stream copy), publishing each region's parameters as soon as they
// are updated, in forward order, and its Adam moments: with them (one fused pass) or afterwards, in reverse order
// (a parameters pass then a moments pass; optim/adamw.h). Both give bitwise the same store.
// Invariants: every rank calls step() once per step; the norm is Σg² of fixed 4096-element blocks summed in
// global block order, known before any update and bitwise independent of ranks and threads (or the Σg² every
// rank is given, computed where the gradients were: the GPU); a non-finite norm skips the step on every rank.
// With the state tier (store.offload) the update is one fused pass streamed through the tier's units, each state
// byte read once and written once; the numbers are the same as in RAM (AdamW's element operations do not change).
// Regions a device holds (optim/resident_regions.h) go to it first, published as they are handed out; the passes
// cover the rest, and the norm must then be given (their gradients are not in the store).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "dist/shared_window.h"
#include "model/param_layout.h"
#include "optim/adamw.h"
#include "store/host_store.h"

namespace mt {

// fused: one pass, 28 B per parameter (30 with the bf16 copy): the least memory traffic, for an engine on the
// same cores (CPU). split: a parameters pass (20 or 22 B) that the next forward waits for, then a moments pass
// (20 B) that overlaps the next head and backward: the shortest critical path for a GPU engine.
enum class UpdatePasses { fused, split };

struct OptimizerSettings {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0.0;
  double max_grad_norm = 1.0;   // <= 0: no clipping
  UpdatePasses passes = UpdatePasses::split;
  bool operator==(const OptimizerSettings&) const = default;
};

struct OptimizerReport {
  int64_t pass = 0;             // 1-based count of step() calls; the version its regions are published at
  double grad_norm = 0.0;       // global L2 norm before clipping
  float clip_coefficient = 1.0f;
  bool skipped = false;         // non-finite gradient norm
  double norm_seconds = 0.0;    // this rank: until the global norm was known
  double update_seconds = 0.0;  // this rank: its slices' parameters (what the next forward waits for)
  double moments_seconds = 0.0; // this rank: then its slices' Adam moments (split passes; 0 when fused)
};

class Optimizer {
 public:
  Optimizer(HostStore& store, const OptimizerSettings& settings);  // collective over the node's ranks
  // on_norm (may be empty) is called once the global norm is known, before this rank updates anything.
  // sum_of_squares: Σg² of the whole gradient, the same on every rank, when already known (no host pass).
  OptimizerReport step(double lr, const std::function<void(const OptimizerReport&)>& on_norm = {},
                       std::optional<double> sum_of_squares = std::nullopt);
  int64_t updates_applied() const { return updates_; }
  void set_updates_applied(int64_t n) { updates_ = n; }

 private:
  double global_sum_of_squares(const double* partials) const;
  void update_over_tier(const AdamWStep& hp, bool skipped);

  HostStore& store_;
  OptimizerSettings settings_;
  int64_t updates_ = 0;
  int64_t passes_ = 0;
  std::vector<int64_t> first_block_;   // per region, its first block's index in global block order
  std::vector<std::vector<DecayRun>> runs_;  // per region, its slots as runs that decay alike (decay_runs)
  int64_t blocks_ = 0;
  dist::SharedWindow shared_;          // 2 × blocks_ partial sums (alternate steps), then per-rank counters
  double* partials_ = nullptr;
  int64_t* partials_done_ = nullptr;   // [rank × 8]: the last pass whose partials the rank has written
};

}  // namespace mt
