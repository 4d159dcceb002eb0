// The plan's choices under two machines' measured rates (plan/step_rates.h), as a table: the MoE layers that keep
// (plan/step_plan.h), the GPU-resident optimizer state (plan/resident_plan.h), the pass count
// (plan/pass_choice.h) and the recommended batch a pass (plan/pass_batch_advice.h) for Qwen2.5-3B at 8, 16, 32 and
// 64 × 1024, Qwen2.5-7B at 32 and 64 × 1024 (the H100) and Qwen3-30B-A3B (10 layers, bench's shape) at 64 × 4096, each resolved by resolve_by_step as bench resolves it, on:
// - the H100 80 GB: its figures from this project's bench of Qwen2.5-7B on it (docs/PERFORMANCE.md, issue #49):
//   its probe's GEMM 906 TFLOP/s (layer shapes 670-775, 725 the middle, × kStepFlopsPerGemmFlop = 486 model
//   TFLOP/s a step; the step measured 487 at 97 % busy), page-locked copies 55 GB/s each way (47 both at once;
//   41.7 in and 49.7 out during training), the probe's parameters pass 11.12 G parameters/s (6.6 in training);
// - the H200 141 GB: StepRates' constants (400 model TFLOP/s, 55 GB/s, 5.9 G parameters/s; docs/PERFORMANCE.md).
// A change to the plan's choice shows here as a diff; the failing case prints the table as the plan now makes it.
// Where the plan recomputes more layers than fit, it keeps the predicted step of the count that fits (for the log).
#include <iostream>
#include <vector>

#include "catch.h"
#include "model/model_spec.h"
#include "plan/memory_plan.h"
#include "plan/step_plan.h"
#include "plan/pass_batch_advice.h"
#include "plan/pass_choice.h"
#include "plan/step_bound.h"
#include "plan/step_rates.h"
#include "recorded_machines.h"

namespace {

using mt_test::kH100;
using mt_test::kH200;

struct Choice {
  const char* model;
  int64_t batch, seq;
  const char* card;
  int64_t passes, recompute, keep, resident, recommended;
  bool operator==(const Choice&) const = default;
};

mt::ModelSpec model(const std::string& name) {
  const mt::ModelSpec spec = mt::load_model_spec(MEGATRAIN_SOURCE_DIR "/configs/models/" + name + ".json");
  return name == "qwen3-30b-a3b" ? mt::first_layers(spec, 10) : spec;
}

// `megatrain bench --model M --seq S --batch B` (bf16, the fp32 master streamed, cuDNN attention) on the card.
Choice plan_choice(const char* name, int64_t batch, int64_t seq, const char* card) {
  const bool h100 = std::string(card) == "H100";
  const int64_t bytes = h100 ? kH100 : kH200;
  const mt::StepRates rates = h100 ? mt_test::h100_rates() : mt::StepRates{};
  const mt::ModelSpec spec = model(name);
  mt::RunShape r = mt_test::bench_shape(batch, seq);
  mt::resolve_by_step(spec, r, bytes, true, mt::StepChoiceInputs{1, true, -1, rates});
  const mt::StepPlan keep = mt::plan_step(spec, r, bytes, 1, true, -1, rates, true);
  return {name, batch, seq, card, r.passes, mt::with_step_plan(r, keep).recompute_layers, keep.layers,
          keep.resident.regions,
          mt::advise_pass_batch(spec, r, bytes, rates).batch};
}

}  // namespace

TEST_CASE("the plan's choices on the H100's and the H200's measured rates", "[plan][step-rates]") {
  const std::vector<Choice> expected = {
      // model, batch, seq, card: passes, layers recomputing, MoE layers keeping, resident regions, recommended batch a
      // pass. The choices by the predicted step (plan/step_time.h). On the H100 Qwen2.5-3B holds every region resident
      // at 8 × 1024 (cuDNN's backward in calls of 4 sequences: nothing streams) and 21 at 16; from 32 the batch's
      // saved activations leave no room, so the plan recomputes more layers than fit (11 of 36 at 32, 24 at 64,
      // where 2 and 21 fit) to hold 10 and 7 regions resident: 1.24 s predicted at 32 against 1.39 s, the host's
      // parameters pass and the copies it spares worth more than the recompute. Qwen3-30B-A3B runs one pass (the
      // pass count by the predicted step, plan/pass_choice.h: 4.92 s against 6.83 s for the memory rule's 4, whose
      // later passes move every streamed gradient both ways; measured on an H100 in the thirtieth session: 4.717 s
      // against 6.476 s) with 6 layers recomputing, no MoE layer keeping (keeping any pushes resident regions off;
      // bench measured keeping 7 12 % slower than none, twenty-fifth session) and the embedding resident.
      {"qwen2.5-3b", 8, 1024, "H100", 1, 0, 0, 38, 128},
      {"qwen2.5-3b", 16, 1024, "H100", 1, 0, 0, 21, 128},
      {"qwen2.5-3b", 32, 1024, "H100", 1, 11, 0, 10, 128},
      {"qwen2.5-3b", 64, 1024, "H100", 1, 24, 0, 7, 128},
      {"qwen3-30b-a3b", 64, 4096, "H100", 1, 6, 0, 1, 128},
      // Qwen2.5-7B at 32 × 1024 recomputes 27 of 28 layers for 11 regions resident, where memory's 11 left none
      // (thirtieth session, an H100: 11 recomputing 3.176 s, 16 forced 2.974 s, 22 forced 2.918 s, 513.1 TFLOP/s 6N);
      // at 64 memory's 21 stay (510.4 measured).
      {"qwen2.5-7b", 32, 1024, "H100", 1, 27, 0, 11, 64},
      {"qwen2.5-7b", 64, 1024, "H100", 1, 21, 0, 0, 64},
      // The recommended batch a pass is the power of two from which the predicted step is 95 % compute
      // (plan/pass_batch_advice.h): the same for every batch of a model and card. On the H200's constants (a slower
      // GEMM than the H100's measured one) the compute dominates from fewer sequences.
      {"qwen2.5-3b", 8, 1024, "H200", 1, 0, 0, 38, 32},
      {"qwen2.5-3b", 16, 1024, "H200", 1, 0, 0, 38, 32},
      {"qwen2.5-3b", 32, 1024, "H200", 1, 0, 0, 38, 32},
      {"qwen2.5-3b", 64, 1024, "H200", 1, 8, 0, 8, 32},
      {"qwen3-30b-a3b", 64, 4096, "H200", 1, 0, 0, 2, 32},
  };
  std::vector<Choice> got;
  for (const Choice& e : expected) got.push_back(plan_choice(e.model, e.batch, e.seq, e.card));
  if (got != expected) {
    std::cout << "the plan now chooses (model, batch, seq, card, passes, layers recomputing, MoE layers keeping, "
                 "resident regions, recommended batch):\n";
    for (const Choice& c : got)
      std::cout << "    {\"" << c.model << "\", " << c.batch << ", " << c.seq << ", \"" << c.card << "\", " << c.passes
                << ", " << c.recompute << ", " << c.keep << ", " << c.resident << ", " << c.recommended << "},\n";
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO(expected[i].model << " " << expected[i].batch << " x " << expected[i].seq << " on the " << expected[i].card);
    CHECK(got[i].passes == expected[i].passes);
    CHECK(got[i].recompute == expected[i].recompute);
    CHECK(got[i].keep == expected[i].keep);
    CHECK(got[i].resident == expected[i].resident);
    CHECK(got[i].recommended == expected[i].recommended);
  }
}

TEST_CASE("where the plan recomputes more layers than fit, it keeps the predicted step of the count that fits",
          "[plan][step-rates]") {
  // Qwen2.5-3B on the H100: at 32 × 1024 more layers recompute than fit (11, where 2 fit), and the step with memory's
  // count is the longer by kRecomputeGain or more; at 16 memory's count stands and nothing is kept.
  const mt::StepRates rates = mt_test::h100_rates();
  const mt::ModelSpec spec = model("qwen2.5-3b");
  for (const int64_t batch : {16, 32}) {
    INFO("batch " << batch);
    mt::RunShape r = mt_test::bench_shape(batch, 1024);
    mt::resolve_by_step(spec, r, kH100, true, mt::StepChoiceInputs{1, true, -1, rates});
    const mt::StepPlan p = mt::plan_step(spec, r, kH100, 1, true, -1, rates, true);
    if (batch == 16) {
      CHECK(p.recompute_layers == r.recompute_layers);
      CHECK(p.memory_recompute_step_s == 0.0);
      continue;
    }
    CHECK(p.recompute_layers > r.recompute_layers);
    const mt::StepPlan fewest = mt::plan_step(spec, r, kH100, 1, true, -1, rates, false);
    CHECK(p.memory_recompute_step_s == fewest.step.step_s);
    CHECK(p.step.step_s < (1.0 - mt::kRecomputeGain) * p.memory_recompute_step_s);
  }
}
