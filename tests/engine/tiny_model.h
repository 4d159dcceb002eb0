// A tiny random model for engine tests: a Qwen3-shaped spec with every optional feature switched on
// (q/k norm, q/k/v/o bias, sliding window, yarn RoPE), its layout, a filled host store, and a batch.
#pragma once
#include <algorithm>
#include <functional>
#include <optional>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "data/batch.h"
#include "engine/engine.h"
#include "model/model_source.h"
#include "model/model_spec.h"
#include "model/param_layout.h"
#include "optim/optimizer.h"
#include "store/host_store.h"

namespace mt::testing {

inline ModelSpec tiny_spec(int64_t layers, bool tied) {
  nlohmann::json j = {{"architectures", {"Qwen3ForCausalLM"}},
                      {"model_type", "qwen3"},
                      {"vocab_size", 40},
                      {"hidden_size", 16},
                      {"intermediate_size", 24},
                      {"num_hidden_layers", layers},
                      {"num_attention_heads", 4},
                      {"num_key_value_heads", 2},
                      {"head_dim", 6},
                      {"max_position_embeddings", 32},
                      {"rms_norm_eps", 1e-6},
                      {"attention_bias", true},
                      {"tie_word_embeddings", tied},
                      {"use_sliding_window", true},
                      {"sliding_window", 3},
                      {"max_window_layers", 1},
                      {"rope_theta", 100.0},
                      {"rope_scaling", {{"rope_type", "yarn"}, {"factor", 2.0}, {"original_max_position_embeddings", 8}}}};
  return parse_model_spec(j, "tiny_spec");
}

// Weights with norms near 1 and everything else random, so every path carries signal.
inline void fill_random(HostStore& store, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (int64_t r = 0; r < store.num_regions(); ++r) {
    for (const ParamSlot& slot : store.layout().regions[static_cast<size_t>(r)].params) {
      float* p = store.master(r) + slot.offset;
      const bool norm = slot.init == InitKind::ones;
      for (int64_t i = 0; i < slot.numel; ++i) p[i] = norm ? 1.0f + 0.1f * d(rng) : 0.2f * d(rng);
    }
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

inline Batch tiny_batch(int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Example> ex;
  for (int len : {7, 3, 9, 5}) {
    Example e;
    for (int i = 0; i < len; ++i) e.input_ids.push_back(static_cast<int32_t>(rng() % vocab));
    e.labels = e.input_ids;
    e.labels[0] = -100;
    ex.push_back(e);
  }
  return make_batch(ex);
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
