// Activation checkpoints in host memory (engine/checkpoint_store.h: HostCheckpoints) train bitwise like
// checkpoints kept in backend memory: the forward copies each checkpoint out of its staging buffer into its host
// slot and the backward copies it back in (the last two are read where the forward left them), for every
// checkpoint interval, micro-batch split, pass count and recompute split; the bytes that cross are exactly those.
#include <limits>
#include <utility>

#include "backend/backend.h"
#include "catch.h"
#include "engine/checkpoint_store.h"
#include "engine/engine.h"
#include "engine/tiny_model.h"
#include "optim/optimizer.h"

using namespace mt;
using namespace mt::testing;

namespace {

constexpr int kSteps = 3;

// Five layers, the four sequences of tiny_batch (padded to 9 tokens), three AdamW steps.
Trained train(CheckpointPlacement placement, int64_t interval, int64_t micro_batch, int64_t passes,
              int64_t recompute_layers) {
  const ModelSpec spec = tiny_spec(5, false);
  const ParamLayout layout = make_param_layout(spec);
  HostStore store(layout, DType::f32);
  fill_random(store, 3);
  auto be = make_cpu_backend();
  EngineOptions o;
  o.max_positions = 32;
  o.checkpoint_interval = interval;
  o.micro_batch_size = micro_batch;
  o.passes = passes;
  o.recompute_layers = recompute_layers;
  o.checkpoints = placement;
  const Batch batch = tiny_batch(spec.vocab_size, 8);
  Engine engine(*be, spec, store, o);
  return train_steps(engine, store, batch, kSteps);
}

}  // namespace

TEST_CASE("checkpoints in host memory train bitwise like checkpoints in backend memory", "[engine][host-checkpoints]") {
  constexpr int64_t all = std::numeric_limits<int64_t>::max();
  const ModelSpec spec = tiny_spec(5, false);
  const Batch batch = tiny_batch(spec.vocab_size, 8);
  // One pass in one micro-batch; two passes of two one-sequence micro-batches each.
  for (int64_t interval : {1, 2, 3})
    for (const auto& [micro_batch, passes] : {std::pair<int64_t, int64_t>{0, 1}, {1, 2}})
      for (int64_t recompute : {all, int64_t{2}}) {
        INFO("checkpoint_interval " << interval << " micro_batch " << micro_batch << " passes " << passes
                                    << " recompute_layers " << recompute);
        const Trained gpu = train(CheckpointPlacement::gpu, interval, micro_batch, passes, recompute);
        const Trained host = train(CheckpointPlacement::host, interval, micro_batch, passes, recompute);
        CHECK(host.losses == gpu.losses);
        CHECK(host.weights == gpu.weights);
        CHECK(gpu.checkpoint_bytes == 0);
        // Per pass: every checkpoint out, all but the last two back in.
        const int64_t count = (spec.num_layers + interval - 1) / interval;
        const int64_t pass_bytes = batch.num_seqs / passes * batch.seq_len * spec.hidden_size * 4;
        CHECK(host.checkpoint_bytes == kSteps * passes * (count + std::max<int64_t>(count - 2, 0)) * pass_bytes);
      }
}

TEST_CASE("an engine refuses an unresolved checkpoint placement", "[engine][host-checkpoints]") {
  auto be = make_cpu_backend();
  CHECK_THROWS(make_checkpoint_store(*be, CheckpointPlacement::automatic));
  CHECK(std::string(checkpoint_placement_name(checkpoint_placement_from_name("host"))) == "host");
  CHECK_THROWS_WITH(checkpoint_placement_from_name("disk"), "activation checkpoints: 'disk' is not auto, gpu or host");
}
