// The MoE layers that keep their expert activations (plan/step_plan.h): a keeping layer's bytes are its kept
// tensors per token × the pass's tokens (engine/moe_block.h moe_kept_bytes, as the engine allocates them); the plan's
// choice for the recorded GPU shape (Qwen3-30B-A3B, 10 layers, 64 × 4096, bench's settings, on an H100 80 GB and an
// H200 141 GB) fits beside the rest of the plan and is the count of least predicted step (plan/step_time.h); a
// forced count is taken as given; none keep on the CPU backend or in a dense model, whose resident state is
// plan_resident's.
#include "catch.h"
#include "engine/moe_block.h"
#include "model/model_spec.h"
#include "plan/memory_plan.h"
#include "plan/step_plan.h"
#include "recorded_machines.h"

namespace {

mt::ModelSpec qwen3_30b_10_layers() {
  return mt::first_layers(mt::load_model_spec(MEGATRAIN_SOURCE_DIR "/configs/models/qwen3-30b-a3b.json"), 10);
}

// `megatrain bench --model configs/models/qwen3-30b-a3b.json --layers 10 --seq 4096 --batch 64` (bf16, the fp32
// master streamed, cuDNN attention), resolved by resolve_auto as bench resolves it.
mt::RunShape bench_run(int64_t gpu_bytes) {
  mt::RunShape r = mt_test::bench_shape(64, 4096);
  mt::resolve_auto(qwen3_30b_10_layers(), r, gpu_bytes, true);
  return r;
}

using mt_test::kH100;
using mt_test::kH200;

}  // namespace

TEST_CASE("a keeping MoE layer takes its kept tensors per token over the pass, and offsets per micro-batch",
          "[plan][moe-keep]") {
  const mt::ModelSpec spec = qwen3_30b_10_layers();
  // bf16, per token: probabilities 128 · 4, weights, top-k, source rows and row places 8 · 4 each, gate and up
  // 8 · 768 · 2 each = 25 216 bytes; offsets 129 · 4 per micro-batch.
  CHECK(mt::moe_kept_bytes(spec, 3, 4096, 1, 2) == 4096 * 25216 + 129 * 4);
  mt::RunShape run = bench_run(kH200);
  REQUIRE(run.passes == 1);
  REQUIRE(run.micro_batch_size == 8);
  const mt::GpuPlan none = mt::plan_gpu(spec, run);
  CHECK(none.moe_kept == 0);
  run.moe_keep_layers = 3;
  const mt::GpuPlan three = mt::plan_gpu(spec, run);
  CHECK(three.moe_kept == 3 * (int64_t{64} * 4096 * 25216 + 8 * 129 * 4));
  CHECK(three.total() == none.total() + three.moe_kept);
}

TEST_CASE("the plan's MoE keeping on Qwen3-30B-A3B, 10 layers, 64 x 4096: H100 80 GB and H200 141 GB",
          "[plan][moe-keep]") {
  const mt::ModelSpec spec = qwen3_30b_10_layers();
  struct Card {
    const char* name;
    int64_t bytes, passes, keep, resident;
  };
  // The H100 resolves 4 passes of 16 sequences (1.54 GiB a keeping layer): keeping any layer pushes layer 1's
  // optimizer state off the GPU, after which it streams in every pass (twice, and its gradient out and in) and the
  // host's passes cover it, which the predicted step weighs above the recompute kept layers save: none keep, and the
  // embedding and layers 0-1 stay resident (keeping 7 measured 12 % slower than none). The H200 runs one pass (6.16 GiB
  // a layer): a keeping layer would push layer 0's state off the GPU, so none keep either.
  for (const Card& card : {Card{"H100 80 GB", kH100, 4, 0, 3}, Card{"H200 141 GB", kH200, 1, 0, 2}}) {
    INFO(card.name);
    const mt::RunShape run = bench_run(card.bytes);
    CHECK(run.passes == card.passes);
    const mt::StepPlan p = mt::plan_step(spec, run, card.bytes, 1, true);
    CHECK(p.moe_layers == 10);
    CHECK(p.layers == card.keep);
    CHECK(p.resident.regions == card.resident);
    CHECK_FALSE(p.forced);
    CHECK(mt::plan_gpu(spec, mt::with_step_plan(run, p)).moe_kept == p.kept_bytes);
    CHECK(mt::describe_step_plan(p).find(std::to_string(card.keep) + " of 10 MoE layers keep") == 0);
    // The least predicted step of the counts whose plan fits (ties to more keeping), each weighed with its own
    // resident state: the counts weighed are those that fit, and each one's step is the forced count's.
    size_t fitting = 0;
    for (int64_t k = 0; k <= 10; ++k) {
      mt::RunShape with = run;
      with.moe_keep_layers = k;
      if (mt::plan_gpu(spec, with).total() > mt::usable_gpu_bytes(card.bytes)) break;
      ++fitting;
      const mt::StepPlan other = mt::plan_step(spec, run, card.bytes, 1, true, k);
      INFO("moe_keep_layers " << k);
      CHECK(other.forced);
      CHECK(other.steps_by_count.empty());
      CHECK(p.step.step_s <= other.step.step_s);
      CHECK(p.steps_by_count[static_cast<size_t>(k)] == Approx(other.step.step_s));
    }
    CHECK(p.steps_by_count.size() == fitting);
  }
}

TEST_CASE("a forced count is taken as given; none keep on the CPU backend or in a dense model", "[plan][moe-keep]") {
  const mt::ModelSpec spec = qwen3_30b_10_layers();
  const mt::RunShape run = bench_run(kH200);
  const mt::StepPlan forced = mt::plan_step(spec, run, kH200, 1, true, 4);
  CHECK(forced.layers == 4);
  CHECK(mt::with_step_plan(run, forced).moe_keep_layers == 4);
  CHECK(mt::plan_step(spec, run, kH200, 1, true, 99).layers == 10);
  CHECK(mt::describe_step_plan(forced).find("4 of 10 MoE layers keep their expert activations (24.6") == 0);
  CHECK(mt::plan_step(spec, run, 0, 1, true).layers == 0);  // the CPU backend
  CHECK(mt::plan_step(spec, run, 0, 1, true, 3).layers == 3);
  const mt::ModelSpec dense = mt::load_model_spec(MEGATRAIN_SOURCE_DIR "/configs/models/qwen2.5-7b.json");
  mt::RunShape dense_run = run;
  dense_run.seq_len = 1024;
  dense_run.batch_size = 32;
  const mt::StepPlan d = mt::plan_step(dense, dense_run, kH200, 1, true);
  CHECK(d.moe_layers == 0);
  CHECK(d.layers == 0);
  CHECK(d.resident.regions == mt::plan_resident(dense, dense_run, kH200, 1, true).regions);
}
