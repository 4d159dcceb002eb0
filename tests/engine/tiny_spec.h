// A tiny model's pieces that need no host store nor engine (the layer harness builds on them in every build of the
// CPU reference, core/real.h): a Qwen3-shaped spec with every optional feature switched on (q/k norm, q/k/v/o bias,
// sliding window, yarn RoPE), random weights for a region, and a padded batch, packed or not.
// Invariant: deterministic for a given seed; the weights are the same values in the fp32 and the fp64 build.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "core/real.h"
#include "data/batch.h"
#include "model/model_source.h"
#include "model/model_spec.h"
#include "model/param_layout.h"

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

// Random weights, region after region from one seeded stream: norm weights near 1 (1 + 0.1·N(0, 1)), everything else
// 0.2·N(0, 1), drawn in fp32, so every path carries signal.
class RandomWeights {
 public:
  explicit RandomWeights(uint32_t seed) : rng_(seed) {}
  void fill(real* p, const Region& region) {
    for (const ParamSlot& slot : region.params) {
      const bool norm = slot.init == InitKind::ones;
      for (int64_t i = 0; i < slot.numel; ++i) p[slot.offset + i] = norm ? 1.0f + 0.1f * d_(rng_) : 0.2f * d_(rng_);
    }
  }

 private:
  std::mt19937 rng_;
  std::normal_distribution<float> d_{0.0f, 1.0f};
};

// Four sequences of 7, 3, 9 and 5 random tokens, right-padded; packed: the 7 and the 5 hold two examples each (3 + 4,
// 2 + 3: positions restart, segments separate them), the 9 one example (its last position crosses a chunk of 8).
inline Batch tiny_batch(int64_t vocab, uint32_t seed, bool packed = false) {
  std::mt19937 rng(seed);
  std::vector<Example> ex;
  for (int len : {7, 3, 9, 5}) {
    Example e;
    for (int i = 0; i < len; ++i) e.input_ids.push_back(static_cast<int32_t>(rng() % vocab));
    e.labels = e.input_ids;
    e.labels[0] = -100;
    if (packed && len == 7) e.pieces = {3, 4};
    if (packed && len == 5) e.pieces = {2, 3};
    ex.push_back(e);
  }
  return make_batch(ex);
}

}  // namespace mt::testing
