// The feed-forward in token chunks: a long sequence trained with its MLP run chunk by chunk gives the same losses
// and weights as unchunked. One chunk is today's path, bitwise; several chunks change only the order in which the
// fp32 weight gradients sum over tokens (as micro-batches do) and the BLAS kernel a GEMM of few rows picks, so
// losses (relative 1e-6) and weights after three AdamW steps (per region ‖Δ‖/‖w‖ 1e-5: Adam's normalised step turns
// the gradients' last-bit differences into larger ones, and how large depends on the BLAS kernels the CPU gets:
// 1.02e-6 on an AVX-512 EPYC) agree within fp32 rounding.
// A mixture-of-experts layer among dense ones runs its block whole whatever the chunk, beside the chunked MLPs.
#include <cmath>
#include <limits>

#include "backend/backend.h"
#include "catch.h"
#include "engine/engine.h"
#include "engine/tiny_model.h"
#include "optim/optimizer.h"

using namespace mt;
using namespace mt::testing;

namespace {

constexpr double kWeightTolerance = 1e-5;

// One sequence of the model's 32 positions (and, with two_seqs, a second of 29 tokens), three steps of AdamW.
// post_norms: sandwich norms on every block (Gemma 2/3, GLM-4), normed in chunks too. moe_middle: layer 1's
// feed-forward a top-2 of 4 experts, wider than the dense MLPs.
Trained train(int64_t token_chunk, int64_t recompute_layers, bool two_seqs, bool post_norms, bool moe_middle = false) {
  ModelSpec spec = tiny_spec(3, false);
  for (LayerSpec& l : spec.layers) l.post_norms = post_norms;
  if (moe_middle) {
    MoeSpec& m = spec.layers[1].moe;
    m.num_experts = 4;
    m.top_k = 2;
    m.intermediate_size = 40;
    m.norm_topk = true;
  }
  const ParamLayout layout = make_param_layout(spec);
  HostStore store(layout, DType::f32);
  fill_random(store, 7);
  auto be = make_cpu_backend();
  EngineOptions o;
  o.max_positions = 32;
  o.token_chunk = token_chunk;
  o.recompute_layers = recompute_layers;
  o.checkpoint_interval = 2;
  std::mt19937 rng(11);
  std::vector<Example> examples;
  for (int len : two_seqs ? std::vector<int>{32, 29} : std::vector<int>{32}) {
    Example e;
    for (int i = 0; i < len; ++i) e.input_ids.push_back(static_cast<int32_t>(rng() % spec.vocab_size));
    e.labels = e.input_ids;
    e.labels[0] = -100;
    examples.push_back(e);
  }
  const Batch batch = make_batch(examples);
  Engine engine(*be, spec, store, o);
  return train_steps(engine, store, batch, 3);
}

}  // namespace

TEST_CASE("a long sequence in token chunks trains like unchunked", "[engine][token-chunks]") {
  constexpr int64_t all = std::numeric_limits<int64_t>::max();
  for (bool post : {false, true})
    for (bool two_seqs : {false, true})
      for (int64_t recompute : {all, int64_t{1}}) {  // every layer recomputes; layers 1.. save their internals
        INFO("post norms " << post << " two sequences " << two_seqs << " recompute_layers " << recompute);
        const Trained whole = train(0, recompute, two_seqs, post);  // the default chunk holds the whole micro-batch
        const Trained one = train(two_seqs ? 64 : 32, recompute, two_seqs, post);
        CHECK(one.losses == whole.losses);
        CHECK(one.weights == whole.weights);
        for (int64_t chunk : {5, 16}) {
          INFO("token_chunk " << chunk);
          const Trained split = train(chunk, recompute, two_seqs, post);
          for (size_t s = 0; s < whole.losses.size(); ++s)
            CHECK(std::abs(split.losses[s] - whole.losses[s]) <= 1e-6 * whole.losses[s]);
          CHECK(worst_region_difference(split.weights, whole.weights) <= kWeightTolerance);
        }
      }
}

TEST_CASE("a mixture-of-experts layer among chunked dense layers trains like unchunked", "[engine][token-chunks][moe]") {
  constexpr int64_t all = std::numeric_limits<int64_t>::max();
  REQUIRE(train(0, all, true, false, true).weights[2].size() > train(0, all, true, false).weights[2].size());
  for (bool post : {false, true})
    for (int64_t recompute : {all, int64_t{1}}) {
      INFO("post norms " << post << " recompute_layers " << recompute);
      const Trained whole = train(0, recompute, true, post, true);
      const Trained split = train(5, recompute, true, post, true);
      for (size_t s = 0; s < whole.losses.size(); ++s)
        CHECK(std::abs(split.losses[s] - whole.losses[s]) <= 1e-6 * whole.losses[s]);
      CHECK(worst_region_difference(split.weights, whole.weights) <= kWeightTolerance);
    }
}
