// The GPU-resident prefix (plan/resident_plan.h): the leading regions whose 16 B (fp32) or 18 B (bf16 weights) per
// parameter (4 fewer for the embedding and head in one pass) fit what the plan leaves free, in layout order and never
// skipping one; none without a GPU, with several
// ranks on the node or GPU ranks, with the state tier, or when turned off; the log line says what is resident.
#include "catch.h"
#include "model/model_spec.h"
#include "model/param_layout.h"
#include "plan/resident_plan.h"

namespace {

mt::ModelSpec qwen25_7b() { return mt::load_model_spec(MEGATRAIN_SOURCE_DIR "/configs/models/qwen2.5-7b.json"); }

mt::RunShape batch32() {
  mt::RunShape r;
  r.dtype = mt::DType::bf16;
  r.stream_dtype = mt::DType::f32;
  r.seq_len = 1024;
  r.batch_size = 32;
  r.micro_batch_size = 16;
  r.recompute_layers = 0;
  return r;
}

constexpr int64_t kH200 = int64_t{143771} << 20;  // what the H200 reports

}  // namespace

TEST_CASE("the resident prefix takes leading regions while their state fits", "[plan][resident]") {
  const mt::ParamLayout layout = mt::make_param_layout(qwen25_7b());
  CHECK(mt::resident_bytes_per_parameter(mt::DType::bf16) == 18);
  CHECK(mt::resident_bytes_per_parameter(mt::DType::f32) == 16);
  const int64_t embedding = layout.regions[0].numel * 18, layer = layout.regions[1].numel * 18;
  CHECK(mt::resident_prefix(layout, mt::DType::bf16, embedding - 1, false).regions == 0);
  const mt::ResidentPlan one = mt::resident_prefix(layout, mt::DType::bf16, embedding + layer - 1, false);
  CHECK(one.regions == 1);
  CHECK(one.parameters == layout.regions[0].numel);
  CHECK(one.bytes == embedding);
  const mt::ResidentPlan three = mt::resident_prefix(layout, mt::DType::bf16, embedding + 2 * layer, false);
  CHECK(three.regions == 3);
  const mt::ResidentPlan all = mt::resident_prefix(layout, mt::DType::f32, layout.total_numel * 16, false);
  CHECK(all.regions == static_cast<int64_t>(layout.regions.size()));
  CHECK(all.parameters == layout.total_numel);
  // One pass: the embedding's own gradient buffer is not allocated, 4 B per parameter back.
  const int64_t single = layout.regions[0].numel * 14;
  CHECK(mt::resident_prefix(layout, mt::DType::bf16, single, true).regions == 1);
  CHECK(mt::resident_prefix(layout, mt::DType::bf16, single, true).bytes == embedding);
  CHECK(mt::resident_prefix(layout, mt::DType::bf16, single, false).regions == 0);
  CHECK(mt::describe_resident(one, layout).find("optimizer state of the embedding (0.545 B of 7.616 B parameters)") == 0);
  CHECK(mt::describe_resident(three, layout).find("the embedding and layers 0-1 ") != std::string::npos);
  CHECK(mt::describe_resident(all, layout).find("every region") != std::string::npos);
}

TEST_CASE("a run's resident state is what the GPU plan leaves free, and none where it cannot be", "[plan][resident]") {
  const mt::ModelSpec spec = qwen25_7b();
  const mt::RunShape run = batch32();
  const mt::ResidentPlan p = mt::plan_resident(spec, run, kH200, 1, true);
  const int64_t free = mt::usable_gpu_bytes(kH200) - mt::plan_gpu(spec, run).total() - mt::kResidentMargin;
  CHECK(p.regions > 1);
  CHECK(p.bytes - mt::make_param_layout(spec).regions[0].numel * 4 <= free);  // one pass: the embedding's sink buffer
  CHECK(p.regions < static_cast<int64_t>(mt::make_param_layout(spec).regions.size()));
  CHECK(mt::resident_prefix(mt::make_param_layout(spec), run.dtype, free, true).regions == p.regions);
  CHECK(mt::plan_resident(spec, run, kH200, 1, false).regions == 0);   // training.optimizer_on_gpu: off
  CHECK(mt::plan_resident(spec, run, 0, 1, true).regions == 0);        // the CPU backend
  CHECK(mt::plan_resident(spec, run, kH200, 2, true).regions == 0);    // data parallel
  mt::RunShape ranks = run;
  ranks.ranks = 2;
  CHECK(mt::plan_resident(spec, ranks, kH200, 1, true).regions == 0);  // the store shared by two ranks
  mt::RunShape tier = run;
  tier.offload = mt::OffloadMode::optimizer;
  CHECK(mt::plan_resident(spec, tier, kH200, 1, true).regions == 0);   // the NVMe tier
}
