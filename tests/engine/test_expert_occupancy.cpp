// The engine's expert occupancy (engine/moe_aux.h ExpertOccupancy): one count per MoE layer forward over a
// micro-batch, not per recomputing forward; a top-k of every expert gives each one rows; two tokens routed top-2 of
// 8 reach at most 4; take_expert_occupancy starts the counts again; dense models count nothing; the busiest expert's
// share of a forward's tokens.
#include "catch.h"
#include "engine/engine.h"
#include "engine/tiny_model.h"

using namespace mt;
using namespace mt::testing;

namespace {

ExpertOccupancy occupancy_of(int64_t experts, int64_t top_k, const std::vector<int>& lengths, bool moe = true) {
  ModelSpec spec = tiny_spec(3, false);
  if (moe) {
    MoeSpec& m = spec.layers[1].moe;
    m.num_experts = experts;
    m.top_k = top_k;
    m.intermediate_size = 12;
    m.norm_topk = true;
  }
  const ParamLayout layout = make_param_layout(spec);
  HostStore store(layout, DType::f32);
  fill_random(store, 3);
  auto be = make_cpu_backend();
  EngineOptions o;
  o.max_positions = 32;
  o.micro_batch_size = 1;  // a micro-batch per sequence
  o.recompute_layers = 1;  // layer 0 recomputes its forward in backward: not counted again
  std::vector<Example> examples;
  for (int len : lengths) {
    Example e;
    for (int i = 0; i < len; ++i) e.input_ids.push_back((7 * i + len) % static_cast<int32_t>(spec.vocab_size));
    e.labels = e.input_ids;
    e.labels[0] = -100;
    examples.push_back(e);
  }
  Engine engine(*be, spec, store, o);
  engine.forward_backward(make_batch(examples));
  const ExpertOccupancy first = engine.take_expert_occupancy();
  CHECK(engine.take_expert_occupancy().forwards == 0);
  return first;
}

}  // namespace

TEST_CASE("expert occupancy: a count per MoE forward over a micro-batch, of the experts that got rows", "[engine][moe]") {
  const ExpertOccupancy all = occupancy_of(4, 4, {12, 9});
  CHECK(all.forwards == 2);  // one MoE layer, two micro-batches
  CHECK(all.experts == 8);
  CHECK(all.experts_with_rows == 8);
  CHECK(all.fraction() == 1.0);
  CHECK(all.lowest == 1.0);
  CHECK(all.busiest() == 1.0);  // top 4 of 4: every token reaches every expert

  const ExpertOccupancy two_tokens = occupancy_of(8, 2, {2});
  CHECK(two_tokens.forwards == 1);
  CHECK(two_tokens.experts == 8);
  CHECK(two_tokens.experts_with_rows >= 2);
  CHECK(two_tokens.experts_with_rows <= 4);
  CHECK(two_tokens.lowest == Approx(two_tokens.fraction()));
  CHECK((two_tokens.busiest() == 0.5 || two_tokens.busiest() == 1.0));  // one or both of the two tokens

  const ExpertOccupancy dense = occupancy_of(0, 0, {12}, false);
  CHECK(dense.forwards == 0);
  CHECK(dense.fraction() == 0.0);
  CHECK(dense.busiest() == 0.0);
}

TEST_CASE("expert occupancy: the busiest expert's share of a forward's tokens, on average over forwards",
          "[engine][moe]") {
  ExpertOccupancy o;
  const std::vector<int64_t> balanced{0, 3, 6, 9, 12};  // 6 tokens top 2 over 4 experts, 3 rows each
  o.add(balanced.data(), 4, 2);
  CHECK(o.busiest() == 0.5);
  const std::vector<int64_t> hot{0, 6, 8, 8, 12};  // every token's first choice expert 0; expert 2 none
  ExpertOccupancy h;
  h.add(hot.data(), 4, 2);
  CHECK(h.busiest() == 1.0);
  CHECK(h.lowest == 0.75);
  o.merge(h);
  CHECK(o.busiest() == 0.75);
  CHECK(o.forwards == 2);
}
