// Whole-store optimizer update (see optimizer.h). Regions and slots are visited in layout order; each
// slot's AdamW pass is threaded inside, so results do not depend on the thread count.
#include "optim/optimizer.h"

#include <cmath>

#include "optim/adamw.h"
#include "optim/grad_clip.h"

namespace mt {

double gradient_sum_of_squares(const HostStore& store) {
  double total = 0.0;
  for (int64_t r = 0; r < store.num_regions(); ++r) {
    const float* g = store.grad(r);
    const int64_t n = store.layout().regions[static_cast<size_t>(r)].numel;
    double sum = 0.0;
#pragma omp parallel for simd reduction(+ : sum) schedule(static)
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(g[i]) * g[i];
    total += sum;
  }
  return total;
}

Optimizer::Optimizer(HostStore& store, const OptimizerSettings& settings) : store_(store), settings_(settings) {}

OptimizerReport Optimizer::step(double lr) {
  OptimizerReport report;
  report.grad_norm = std::sqrt(gradient_sum_of_squares(store_));
  if (!std::isfinite(report.grad_norm)) {
    report.skipped = true;
    return report;
  }
  report.clip_coefficient = clip_coefficient(report.grad_norm, settings_.max_grad_norm);
  ++updates_;
  AdamWStep hp;
  hp.lr = lr;
  hp.beta1 = settings_.beta1;
  hp.beta2 = settings_.beta2;
  hp.eps = settings_.eps;
  hp.weight_decay = settings_.weight_decay;
  hp.step = updates_;
  hp.grad_scale = report.clip_coefficient;
  for (int64_t r = 0; r < store_.num_regions(); ++r) {
    const Region& region = store_.layout().regions[static_cast<size_t>(r)];
    std::uint16_t* bf16 = store_.stream_bf16(r);
    for (const ParamSlot& slot : region.params) {
      const int64_t o = slot.offset;
      adamw_update(store_.master(r) + o, store_.exp_avg(r) + o, store_.exp_avg_sq(r) + o, store_.grad(r) + o,
                   slot.numel, hp, slot.weight_decay, bf16 ? bf16 + o : nullptr);
    }
  }
  return report;
}

}  // namespace mt
