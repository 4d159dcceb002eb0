// Packing parity: examples packed into sequences (segments, restarted positions, no target across a boundary) give
// the engine the same per-example losses, the same total loss and the same gradients (within fp32 rounding) as the
// same examples one per row, on a tiny random model with sliding-window layers. (RoPE scores depend on relative
// positions only, so restarting positions per example is checked on the batch itself, in tests/data/test_packing.cpp.)
#include <cmath>
#include <random>

#include "backend/backend.h"
#include "catch.h"
#include "data/packing.h"
#include "engine/engine.h"
#include "engine/tiny_model.h"

using namespace mt;
using namespace mt::testing;

namespace {

struct Result {
  double loss = 0;
  std::vector<std::vector<float>> grads;
};

Result run(const Batch& batch) {
  const ModelSpec spec = tiny_spec(2, false);
  const ParamLayout layout = make_param_layout(spec);
  HostStore store(layout, DType::f32);
  fill_random(store, 5);
  auto be = make_cpu_backend();
  EngineOptions o;
  o.max_positions = 32;
  Engine engine(*be, spec, store, o);
  Result r;
  r.loss = engine.forward_backward(batch).mean();
  for (int64_t i = 0; i < store.num_regions(); ++i)
    r.grads.emplace_back(store.grad(i), store.grad(i) + layout.regions[static_cast<size_t>(i)].numel);
  return r;
}

// Random examples (vocab 40) of the given lengths; the first label of each is -100, one more in the middle.
std::vector<Example> examples_of(const std::vector<int>& lengths) {
  std::mt19937 rng(11);
  std::vector<Example> out;
  for (const int len : lengths) {
    Example e;
    for (int i = 0; i < len; ++i) e.input_ids.push_back(static_cast<int32_t>(rng() % 40));
    e.labels = e.input_ids;
    e.labels[0] = kIgnoreIndex;
    e.labels[static_cast<size_t>(len / 2)] = kIgnoreIndex;
    out.push_back(e);
  }
  return out;
}

}  // namespace

TEST_CASE("a packed batch trains exactly like the same examples unpacked", "[engine][packing]") {
  const std::vector<Example> examples = examples_of({7, 3, 9, 5, 4, 2});
  const Result unpacked = run(make_batch(examples));
  for (const int64_t max_seq_len : {30, 12, 9}) {
    const std::vector<Example> packed = pack_examples(examples, max_seq_len);
    INFO("max_seq_len " << max_seq_len << ": " << packed.size() << " sequences");
    const Batch batch = make_batch(packed);
    CHECK(batch.num_target_tokens == make_batch(examples).num_target_tokens);
    const Result result = run(batch);
    CHECK(std::abs(result.loss - unpacked.loss) <= 1e-6 * unpacked.loss);
    CHECK(worst_region_difference(result.grads, unpacked.grads) <= 1e-5);
  }
}

TEST_CASE("each example's loss inside a packed sequence equals its loss alone", "[engine][packing]") {
  const std::vector<Example> examples = examples_of({7, 3, 9, 5});
  const std::vector<Example> packed = pack_examples(examples, 32);
  REQUIRE(packed.size() == 1);
  REQUIRE(packed[0].pieces == std::vector<int32_t>{9, 7, 5, 3});
  const std::vector<size_t> order = {2, 0, 3, 1};  // the examples in packing order
  size_t start = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const double alone = run(make_batch({examples[order[k]]})).loss;
    Example only = packed[0];  // train on example k's span only
    const size_t end = start + static_cast<size_t>(packed[0].pieces[k]);
    for (size_t t = 0; t < only.labels.size(); ++t)
      if (t < start || t >= end) only.labels[t] = kIgnoreIndex;
    const double inside = run(make_batch({only})).loss;
    INFO("example " << order[k]);
    CHECK(std::abs(inside - alone) <= 1e-6 * alone);
    start = end;
  }
}
