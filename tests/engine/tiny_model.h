// A tiny random model for engine tests: tiny_spec.h's spec, weights and batch in a host store and through the engine.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "engine/engine.h"
#include "engine/tiny_spec.h"
#include "model/model_spec.h"
#include "model/param_layout.h"
#include "optim/optimizer.h"
#include "store/host_store.h"

namespace mt::testing {

// Every region's weights from RandomWeights(seed).
inline void fill_random(HostStore& store, uint32_t seed) {
  RandomWeights weights(seed);
  for (int64_t r = 0; r < store.num_regions(); ++r) {
    weights.fill(store.master(r), store.layout().regions[static_cast<size_t>(r)]);
    store.refresh_stream_copy(r);
  }
}

// Worst per-region ‖a − b‖ / ‖b‖ over region-shaped gradient copies.
inline double worst_region_difference(const std::vector<std::vector<float>>& a,
                                      const std::vector<std::vector<float>>& b) {
  double worst = 0;
  for (size_t r = 0; r < a.size(); ++r) {
    double diff = 0, norm = 0;
    for (size_t i = 0; i < a[r].size(); ++i) {
      diff += (double(a[r][i]) - b[r][i]) * (double(a[r][i]) - b[r][i]);
      norm += double(b[r][i]) * b[r][i];
    }
    worst = std::max(worst, std::sqrt(diff / norm));
  }
  return worst;
}

// Loss and every region's gradient after one forward_backward of the 3-layer tiny model on tiny_batch.
struct EngineRun {
  double loss = 0;
  std::vector<std::vector<float>> grads;
  std::optional<double> sum_of_squares;  // Engine::gradient_sum_of_squares()
};
using TransfersFactory = std::function<EngineTransfers(Backend&, HostStore&)>;
inline EngineRun run_tiny_engine(Backend& be, bool tied, EngineOptions options, DType dtype = DType::f32,
                                 const TransfersFactory& transfers = {}) {
  const ModelSpec spec = tiny_spec(3, tied);
  const ParamLayout layout = make_param_layout(spec);
  HostStore store(layout, dtype);
  fill_random(store, 21);
  options.max_positions = 32;
  EngineRun run;
  {
    Engine engine(be, spec, store, options, transfers ? transfers(be, store) : EngineTransfers{});
    run.loss = engine.forward_backward(tiny_batch(spec.vocab_size, 4)).mean();
    run.sum_of_squares = engine.gradient_sum_of_squares();
  }
  for (int64_t r = 0; r < store.num_regions(); ++r)
    run.grads.emplace_back(store.grad(r), store.grad(r) + layout.regions[static_cast<size_t>(r)].numel);
  return run;
}

// Losses and weights after training a few AdamW steps.
struct Trained {
  std::vector<double> losses;               // per step
  std::vector<std::vector<float>> weights;  // fp32 master per region after the steps
  int64_t checkpoint_bytes = 0;             // Engine::checkpoint_bytes_moved after the steps
};

// `steps` steps of forward_backward on batch and AdamW at lr 1e-2 over store.
inline Trained train_steps(Engine& engine, HostStore& store, const Batch& batch, int steps) {
  Trained t;
  Optimizer opt(store, OptimizerSettings{});
  for (int step = 0; step < steps; ++step) {
    t.losses.push_back(engine.forward_backward(batch).mean());
    opt.step(1e-2);
  }
  t.checkpoint_bytes = engine.checkpoint_bytes_moved();
  for (int64_t r = 0; r < store.num_regions(); ++r)
    t.weights.emplace_back(store.master(r), store.master(r) + store.layout().regions[static_cast<size_t>(r)].numel);
  return t;
}

}  // namespace mt::testing
