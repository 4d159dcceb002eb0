// Evaluation's forward-only pass: its loss equals forward_backward's on the same batch and weights (bitwise with the
// same micro-batches; tied or not, every pass split), it moves no gradient and leaves the store's gradients alone.
#include <limits>

#include "backend/backend.h"
#include "catch.h"
#include "engine/engine.h"
#include "engine/tiny_model.h"
#include "engine/weight_stream.h"

using namespace mt;
using namespace mt::testing;

namespace {

// A gradient sink that counts what is asked of it: evaluation must ask nothing.
class CountingSink final : public GradientSink {
 public:
  CountingSink(Backend& be, HostStore& store, int64_t* calls) : inner_(be, store), calls_(calls) {}
  float* begin(int64_t region) override { return ++*calls_, inner_.begin(region); }
  void finish(int64_t region, bool first_pass) override { ++*calls_, inner_.finish(region, first_pass); }
  void wait() override { inner_.wait(); }
  int64_t bytes_moved() const override { return inner_.bytes_moved(); }

 private:
  BasicGradientSink inner_;
  int64_t* calls_;
};

}  // namespace

TEST_CASE("the forward-only loss equals the training loss on the same batch", "[engine][eval]") {
  auto be = make_cpu_backend();
  for (bool tied : {false, true})
    for (int64_t passes : {1, 2})
      for (int64_t mb : {0, 1}) {
        INFO("tied " << tied << " passes " << passes << " micro_batch " << mb);
        const ModelSpec spec = tiny_spec(3, tied);
        const ParamLayout layout = make_param_layout(spec);
        HostStore store(layout, DType::f32);
        fill_random(store, 21);
        EngineOptions o;
        o.max_positions = 32;
        o.passes = passes;
        o.micro_batch_size = mb;
        o.checkpoint_interval = 2;
        o.recompute_layers = 1;
        int64_t sink_calls = 0;
        EngineTransfers transfers;
        transfers.grads = std::make_unique<CountingSink>(*be, store, &sink_calls);
        Engine engine(*be, spec, store, o, std::move(transfers));
        const Batch batch = tiny_batch(spec.vocab_size, 4);
        std::vector<std::vector<float>> grads_before;
        for (int64_t r = 0; r < store.num_regions(); ++r)
          grads_before.emplace_back(store.grad(r), store.grad(r) + layout.regions[static_cast<size_t>(r)].numel);
        const StepLoss eval = engine.forward_loss(batch);
        CHECK(sink_calls == 0);
        for (int64_t r = 0; r < store.num_regions(); ++r)
          CHECK(std::vector<float>(store.grad(r), store.grad(r) + layout.regions[static_cast<size_t>(r)].numel) ==
                grads_before[static_cast<size_t>(r)]);
        const StepLoss train = engine.forward_backward(batch);
        CHECK(sink_calls > 0);
        CHECK(eval.target_tokens == train.target_tokens);
        CHECK(eval.loss_sum == train.loss_sum);
      }
}
