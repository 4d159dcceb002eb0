// A decoder layer of a tiny model bound for gradient checks: random weights, a padded batch of 3 sequences, a layer
// input x and the random linear functional Σ r·y of the layer's output (r zero on padded rows, which carry no
// gradient), its central finite difference in one weight or input element, and the check of the layer's backward
// against it.
#pragma once
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "catch.h"
#include "engine/decoder_layer.h"
#include "engine/tiny_model.h"
#include "model/rope.h"

namespace mt::testing {

struct LayerHarness {
  ModelSpec spec;
  ParamLayout layout = make_param_layout(spec);
  HostStore store{layout, DType::f32};
  std::unique_ptr<Backend> be = make_cpu_backend();
  RopeTable rope = make_rope_table(spec.rope_tables.at(0), 32);
  LayerContext ctx{be.get(), &spec, &layout, {{rope.cos.data(), rope.sin.data(), rope.rot_dim, false}}, {}};
  Batch batch = tiny_batch(spec.vocab_size, 3);
  MicroBatch mb;
  DecoderWorkspace ws{*be, spec, batch.num_seqs * batch.seq_len, batch.num_seqs, batch.seq_len};
  std::vector<float> x, r;  // layer input and the random functional's weights
  float fd_step = 2e-3f;     // the central difference's half step

  explicit LayerHarness(ModelSpec s = tiny_spec(2, false)) : spec(std::move(s)) {
    fill_random(store, 5);
    mb.seqs = batch.num_seqs;
    mb.seq_len = batch.seq_len;
    mb.input_ids = batch.input_ids.data();
    mb.targets = batch.targets.data();
    mb.positions = batch.positions.data();
    mb.seq_lens = batch.seq_lens.data();
    std::mt19937 rng(9);
    std::normal_distribution<float> d(0.0f, 1.0f);
    x.resize(static_cast<size_t>(mb.tokens() * spec.hidden_size));
    r.resize(x.size());
    for (auto& v : x) v = d(rng);
    for (auto& v : r) v = d(rng);
    for (int64_t b = 0; b < mb.seqs; ++b)
      for (int64_t t = batch.seq_lens[b]; t < mb.seq_len; ++t)
        for (int64_t h = 0; h < spec.hidden_size; ++h) r[(b * mb.seq_len + t) * spec.hidden_size + h] = 0;
  }

  double functional(int64_t layer) {
    std::vector<float> y(x.size());
    decoder_layer_forward(ctx, layer, store.master(layer + 1), x.data(), y.data(), mb, ws);
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += double(r[i]) * y[i];
    return s;
  }

  // ∂functional/∂*value by central differences.
  double fd(int64_t layer, float* value) {
    const float eps = fd_step, saved = *value;
    *value = saved + eps;
    const double up = functional(layer);
    *value = saved - eps;
    const double down = functional(layer);
    *value = saved;
    return (up - down) / (2.0 * eps);
  }
};

// The layer's backward (dx and every weight tensor's gradient, 4 elements each) against h.fd.
inline void check_layer_backward(LayerHarness& h, int64_t layer) {
  std::vector<float> dx(h.x.size()), dw(static_cast<size_t>(h.layout.layer(layer).numel), 0.0f);
  decoder_layer_backward(h.ctx, layer, h.store.master(layer + 1), h.x.data(), h.r.data(), dx.data(), dw.data(), h.mb,
                         h.ws);
  std::mt19937 pick(11);
  for (const ParamSlot& slot : h.layout.layer(layer).params) {
    for (int k = 0; k < 4; ++k) {
      const int64_t i = slot.offset + static_cast<int64_t>(pick() % slot.numel);
      const double numeric = h.fd(layer, h.store.master(layer + 1) + i);
      INFO("layer " << layer << " " << slot.hf_name << " element " << i - slot.offset);
      CHECK(std::abs(dw[i] - numeric) <= 2e-2 * (std::abs(numeric) + 0.05));
    }
  }
  for (int k = 0; k < 12; ++k) {
    const int64_t b = k % h.mb.seqs, t = static_cast<int64_t>(pick() % h.batch.seq_lens[b]);
    const int64_t i = (b * h.mb.seq_len + t) * h.spec.hidden_size + static_cast<int64_t>(pick() % 16);
    const double numeric = h.fd(layer, h.x.data() + i);
    INFO("layer " << layer << " input element " << i);
    CHECK(std::abs(dx[i] - numeric) <= 2e-2 * (std::abs(numeric) + 0.05));
  }
}

}  // namespace mt::testing
