// The layers of a tiny model bound for gradient checks (tests/grad64/fd_check.h) and backward calls, on the CPU
// backend in either build of it (core/real.h): random weights per region, every RoPE table of the model and the ALiBi
// slopes of its layers, tiny_batch's 4 sequences (packed or not) with their segments and chunked attention's key groups
// where the model has them, a layer input x and the random linear functional Σ r·y of a layer's output (r zero on
// padded rows, which carry no gradient).
// Invariant: owns every buffer the layer templates read; the weights are RandomWeights(5)'s, whatever the build.
#pragma once
#include <memory>
#include <random>
#include <vector>

#include "engine/chunked_attention.h"
#include "engine/decoder_layer.h"
#include "engine/tiny_spec.h"
#include "model/alibi.h"
#include "model/rope.h"

namespace mt::testing {

struct LayerHarness {
  ModelSpec spec;
  ParamLayout layout = make_param_layout(spec);
  std::vector<std::vector<real>> regions;  // weights: embedding, decoder layers, head (ParamLayout's regions)
  std::unique_ptr<Backend> be = make_cpu_backend();
  std::vector<std::vector<real>> rope_cos, rope_sin, alibi;  // per RoPE table; per layer (empty without ALiBi)
  LayerContext ctx{be.get(), &spec, &layout, {}, {}};
  Batch batch;
  std::vector<int32_t> chunk_ids;  // chunked_attention.h's, or empty
  MicroBatch mb;
  DecoderWorkspace ws{*be, spec, batch.num_seqs * batch.seq_len, batch.num_seqs, batch.seq_len};
  std::vector<real> x, r;  // layer input and the random functional's weights

  explicit LayerHarness(ModelSpec s = tiny_spec(2, false), bool packed = false)
      : spec(std::move(s)), batch(tiny_batch(spec.vocab_size, 3, packed)) {
    RandomWeights weights(5);
    for (const Region& region : layout.regions) {
      regions.emplace_back(static_cast<size_t>(region.numel));
      weights.fill(regions.back().data(), region);
    }
    for (const RopeSpec& t : spec.rope_tables) {
      const RopeTable table = make_rope_table(t, 32);
      rope_cos.emplace_back(table.cos.begin(), table.cos.end());
      rope_sin.emplace_back(table.sin.begin(), table.sin.end());
      ctx.rope.push_back({rope_cos.back().data(), rope_sin.back().data(), table.rot_dim, t.interleaved});
    }
    for (const LayerSpec& l : spec.layers) {
      std::vector<float> slopes = l.attention.alibi ? alibi_slopes(l.attention.num_heads) : std::vector<float>{};
      alibi.emplace_back(slopes.begin(), slopes.end());
      ctx.alibi_slopes.push_back(alibi.back().empty() ? nullptr : alibi.back().data());
    }
    mb.seqs = batch.num_seqs;
    mb.seq_len = batch.seq_len;
    mb.input_ids = batch.input_ids.data();
    mb.targets = batch.targets.data();
    mb.positions = batch.positions.data();
    mb.seq_lens = batch.seq_lens.data();
    mb.segments = batch.segments.empty() ? nullptr : batch.segments.data();
    if (const int64_t chunk = attention_chunk(spec); chunk > 0)
      chunk_ids = chunk_segment_ids(batch.positions, batch.seq_len, chunk);
    mb.chunk_segments = chunk_ids.empty() ? nullptr : chunk_ids.data();
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

  real* weights(int64_t region) { return regions[static_cast<size_t>(region)].data(); }
  int64_t head_region() const { return static_cast<int64_t>(regions.size()) - 1; }

  // Σ r·y of decoder layer `layer`'s output, in fp64.
  double functional(int64_t layer) {
    std::vector<real> y(x.size());
    decoder_layer_forward(ctx, layer, weights(layer + 1), x.data(), y.data(), mb, ws);
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += double(r[i]) * y[i];
    return s;
  }
};

}  // namespace mt::testing
