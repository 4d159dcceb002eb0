// Optimizer: one update of every parameter in the host store — global gradient norm, clipping, AdamW
// (decay on matrices only), refresh of the streaming copy.
// Invariant: the clipping coefficient is computed from the exact global norm before any region is
// updated; a step whose gradient norm is not finite changes nothing and is reported as skipped.
#pragma once
#include <cstdint>

#include "store/host_store.h"

namespace mt {

struct OptimizerSettings {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0.0;
  double max_grad_norm = 1.0;   // <= 0: no clipping
};

struct OptimizerReport {
  double grad_norm = 0.0;       // global L2 norm before clipping
  float clip_coefficient = 1.0f;
  bool skipped = false;         // non-finite gradient norm
};

class Optimizer {
 public:
  Optimizer(HostStore& store, const OptimizerSettings& settings);
  OptimizerReport step(double lr);
  int64_t updates_applied() const { return updates_; }
  void set_updates_applied(int64_t n) { updates_ = n; }

 private:
  HostStore& store_;
  OptimizerSettings settings_;
  int64_t updates_ = 0;
};

// Σ over all regions of Σ grad², in fp64.
double gradient_sum_of_squares(const HostStore& store);

}  // namespace mt
