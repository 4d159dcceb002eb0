// MoE layers that keep their expert activations (EngineOptions::moe_keep_layers, engine/moe_block.h MoeKept) train
// bitwise like MoE layers that recompute them: the same losses (router loss included) and the same weights after
// three AdamW steps, whichever MoE layers keep, with post-norms (whose backward reads the block's output), segment
// recompute (checkpoint_interval 3: the kept layer's forward runs again from its kept rows), micro-batches of one
// sequence (kept rows and offsets per micro-batch), two passes (the second pass's forward refills them) and saved
// internals beside them. The model: tiny_spec's three layers with layers 0 and 2 mixtures of 4 experts (top 2), layer
// 0 plain, layer 2 with a sigmoid-gated shared expert (Qwen2-MoE); the fixture families are in
// tests/integration/test_moe_keep_families.cpp.
#include <limits>

#include "catch.h"
#include "engine/engine.h"
#include "engine/moe_block.h"
#include "engine/tiny_model.h"

using namespace mt;
using namespace mt::testing;

namespace {

struct Shape {
  bool post_norms = false;
  int64_t checkpoint_interval = 1, micro_batch = 0, passes = 1;
  int64_t recompute_layers = std::numeric_limits<int64_t>::max();
};

ModelSpec moe_spec(bool post_norms) {
  ModelSpec spec = tiny_spec(3, false);
  for (int64_t i : {0, 2}) {
    LayerSpec& l = spec.layers[static_cast<size_t>(i)];
    l.post_norms = post_norms;
    l.moe.num_experts = 4;
    l.moe.top_k = 2;
    l.moe.intermediate_size = 20;
    l.moe.norm_topk = i == 0;
  }
  spec.layers[2].moe.shared_intermediate_size = 12;
  spec.layers[2].moe.shared_gate = true;
  spec.layers[1].post_norms = post_norms;
  return spec;
}

struct KeepRun {
  std::vector<double> losses, aux_losses;
  std::vector<std::vector<float>> weights;
};

KeepRun train(const Shape& shape, int64_t keep_layers) {
  const ModelSpec spec = moe_spec(shape.post_norms);
  const ParamLayout layout = make_param_layout(spec);
  HostStore store(layout, DType::f32);
  fill_random(store, 5);
  auto be = make_cpu_backend();
  EngineOptions o;
  o.max_positions = 32;
  o.checkpoint_interval = shape.checkpoint_interval;
  o.micro_batch_size = shape.micro_batch;
  o.passes = shape.passes;
  o.recompute_layers = shape.recompute_layers;
  o.moe_keep_layers = keep_layers;
  o.moe_aux_loss = true;
  o.moe_aux_coef = 0.05;
  Engine engine(*be, spec, store, o);
  const Batch batch = tiny_batch(spec.vocab_size, 9);
  Optimizer opt(store, OptimizerSettings{});
  KeepRun run;
  for (int step = 0; step < 3; ++step) {
    const StepLoss loss = engine.forward_backward(batch);
    run.losses.push_back(loss.mean());
    run.aux_losses.push_back(loss.aux_loss);
    opt.step(1e-2);
  }
  for (int64_t r = 0; r < store.num_regions(); ++r)
    run.weights.emplace_back(store.master(r), store.master(r) + layout.regions[static_cast<size_t>(r)].numel);
  return run;
}

}  // namespace

TEST_CASE("the last moe_keep_layers MoE layers keep", "[engine][moe-keep]") {
  const ModelSpec spec = moe_spec(false);
  CHECK(moe_layer_count(spec) == 2);
  CHECK_FALSE(moe_layer_keeps(spec, 0, 1));
  CHECK_FALSE(moe_layer_keeps(spec, 1, 2));  // dense
  CHECK(moe_layer_keeps(spec, 2, 1));
  CHECK(moe_layer_keeps(spec, 0, 2));
  CHECK_FALSE(moe_layer_keeps(spec, 2, 0));
  // Layer 2's kept bytes per token: probs 4·4, weights/idx/source/row_of 4·2 each, gate and up 2·20 each, the shared
  // expert's gate and up 12 each, its output 16 and logit 1 (fp32: 4 bytes); and 5 offsets per micro-batch.
  CHECK(moe_kept_bytes(spec, 2, 10, 3, 4) == 10 * (16 + 4 * 8 + 4 * (40 + 40 + 12 + 12 + 16 + 1)) + 3 * 5 * 4);
  CHECK(moe_kept_bytes(spec, 1, 10, 3, 4) == 0);
}

TEST_CASE("MoE layers that keep their expert activations train bitwise like recomputing ones", "[engine][moe-keep]") {
  for (bool post : {false, true})
    for (const int64_t c : {int64_t{1}, int64_t{3}})
      for (const int64_t mb : {int64_t{0}, int64_t{1}})
        for (const int64_t passes : {int64_t{1}, int64_t{2}})
          for (const int64_t recompute : {std::numeric_limits<int64_t>::max(), int64_t{1}}) {
            const Shape shape{post, c, mb, passes, recompute};
            INFO("post norms " << post << " checkpoint_interval " << c << " micro-batch " << mb << " passes " << passes
                               << " recompute_layers " << recompute);
            const KeepRun recomputed = train(shape, 0);
            REQUIRE(recomputed.aux_losses[0] > 0);
            for (const int64_t keep : {1, 2, 5}) {
              INFO("moe_keep_layers " << keep);
              const KeepRun kept = train(shape, keep);
              CHECK(kept.losses == recomputed.losses);
              CHECK(kept.aux_losses == recomputed.aux_losses);
              CHECK(kept.weights == recomputed.weights);
            }
          }
}
