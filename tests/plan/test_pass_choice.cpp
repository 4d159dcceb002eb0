// The pass count by the predicted step (plan/pass_choice.h) on the H100's and the H200's rates: where the memory rule
// (resolve_auto: the fewest recomputing layers) and the step disagree, and that a given count, the CPU backend and a
// batch of one candidate resolve exactly as resolve_auto does.
#include <iostream>
#include <string>

#include "catch.h"
#include "model/model_spec.h"
#include "plan/memory_plan.h"
#include "plan/pass_choice.h"
#include "plan/step_rates.h"
#include "recorded_machines.h"

namespace {

using mt_test::bench_shape;
using mt_test::h100_rates;
using mt_test::kH100;
using mt_test::kH200;

mt::ModelSpec model(const std::string& name, int64_t layers = 0) {
  const mt::ModelSpec spec = mt::load_model_spec(MEGATRAIN_SOURCE_DIR "/configs/models/" + name + ".json");
  return layers > 0 ? mt::first_layers(spec, layers) : spec;
}

struct Chosen {
  mt::RunShape run;
  mt::PassChoice choice;
};

Chosen choose(const mt::ModelSpec& spec, mt::RunShape run, int64_t gpu_bytes, const mt::StepRates& rates) {
  const mt::PassChoice c = mt::resolve_by_step(spec, run, gpu_bytes, true, mt::StepChoiceInputs{1, true, -1, rates});
  std::cout << "passes " << c.passes << " (memory rule " << c.memory_passes << "): " << mt::describe_pass_choice(c)
            << "\n";
  return {run, c};
}

}  // namespace

TEST_CASE("the pass count by the predicted step: one pass of Qwen3-30B-A3B's 64 x 4096 on the H100",
          "[plan][pass-choice]") {
  const mt::ModelSpec spec = model("qwen3-30b-a3b", 10);
  const Chosen h100 = choose(spec, bench_shape(64, 4096), kH100, h100_rates());
  INFO(mt::describe_pass_choice(h100.choice));
  // The memory rule runs 4 passes (no layer recomputing); every pass after the first moves each streamed region's
  // gradient both ways, and one pass with layers recomputing is predicted shorter.
  CHECK(h100.choice.memory_passes == 4);
  CHECK(h100.choice.passes == 1);
  CHECK(h100.run.passes == 1);
  CHECK(h100.choice.steps_by_passes.front().first == 4);
  REQUIRE(h100.choice.steps_by_passes.size() == 3);  // 4, then 1 and 2 (16 passes of 4 sequences are too short)
  double one = 0;
  for (const auto& [p, s] : h100.choice.steps_by_passes)
    if (p == 1) one = s;
  CHECK(one < 0.98 * h100.choice.steps_by_passes.front().second);
  CHECK_THAT(mt::describe_pass_choice(h100.choice), mt_test::contains("1 gradient accumulation pass(es), not the 4"));
  // The resolved run is resolve_auto's for one pass.
  mt::RunShape one_pass = bench_shape(64, 4096);
  one_pass.passes = 1;
  mt::resolve_auto(spec, one_pass, kH100, true);
  CHECK(h100.run.micro_batch_size == one_pass.micro_batch_size);
  CHECK(h100.run.recompute_layers == one_pass.recompute_layers);
  // The H200 already runs it in one pass.
  const Chosen h200 = choose(spec, bench_shape(64, 4096), kH200, mt::StepRates{});
  CHECK(h200.choice.memory_passes == 1);
  CHECK(h200.choice.passes == 1);
  CHECK(mt::describe_pass_choice(h200.choice).empty());
}

TEST_CASE("the pass count by the predicted step keeps the measured choices of the dense shapes",
          "[plan][pass-choice]") {
  // docs/PERFORMANCE.md (H200): Qwen2.5-3B batch 256 is fastest in 4 passes, 128 in 2; Qwen2.5-7B 128 in 2, 64 in 1.
  struct Case {
    const char* model;
    int64_t batch, passes;
  };
  for (const Case& c : {Case{"qwen2.5-3b", 256, 4}, Case{"qwen2.5-3b", 128, 2}, Case{"qwen2.5-7b", 128, 2},
                        Case{"qwen2.5-7b", 64, 1}}) {
    INFO(c.model << " batch " << c.batch);
    const Chosen h200 = choose(model(c.model), bench_shape(c.batch, 1024), kH200, mt::StepRates{});
    CHECK(h200.run.passes == c.passes);
  }
}

TEST_CASE("a given pass count, the CPU backend and one candidate resolve as resolve_auto", "[plan][pass-choice]") {
  const mt::ModelSpec spec = model("qwen3-30b-a3b", 10);
  const auto same = [&](mt::RunShape run, int64_t gpu_bytes) {
    mt::RunShape memory = run;
    mt::resolve_auto(spec, memory, gpu_bytes, true);
    const Chosen c = choose(spec, run, gpu_bytes, h100_rates());
    CHECK(c.run.passes == memory.passes);
    CHECK(c.run.micro_batch_size == memory.micro_batch_size);
    CHECK(c.run.recompute_layers == memory.recompute_layers);
    CHECK(c.choice.passes == c.choice.memory_passes);
    CHECK(c.choice.steps_by_passes.empty());
  };
  mt::RunShape given = bench_shape(64, 4096);
  given.passes = 4;
  same(given, kH100);
  same(bench_shape(64, 4096), 0);      // the CPU backend: one pass
  same(bench_shape(16, 4096), kH100);  // 65 536 tokens: one pass is the only candidate
}
