// The GPU-resident prefix (plan/resident_plan.h): the most leading regions whose 16 B (fp32) or 18 B (bf16 weights)
// per parameter fit beside the GPU plan that streams only the rest (its slots sized by the largest streamed region,
// no gradient buffer for a resident region in one pass); none without a GPU, with several ranks on the node or GPU
// ranks, with the state tier, or when turned off; the log line says what is resident.
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

TEST_CASE("the resident prefix: the state of the leading regions", "[plan][resident]") {
  const mt::ParamLayout layout = mt::make_param_layout(qwen25_7b());
  CHECK(mt::resident_bytes_per_parameter(mt::DType::bf16) == 18);
  CHECK(mt::resident_bytes_per_parameter(mt::DType::f32) == 16);
  const mt::ResidentPlan one = mt::resident_prefix(layout, mt::DType::bf16, 1);
  CHECK(one.regions == 1);
  CHECK(one.parameters == layout.regions[0].numel);
  CHECK(one.bytes == layout.regions[0].numel * 18);
  const mt::ResidentPlan three = mt::resident_prefix(layout, mt::DType::bf16, 3);
  CHECK(three.parameters == layout.regions[0].numel + 2 * layout.regions[1].numel);
  const mt::ResidentPlan all = mt::resident_prefix(layout, mt::DType::f32, 1000);
  CHECK(all.regions == static_cast<int64_t>(layout.regions.size()));
  CHECK(all.parameters == layout.total_numel);
  CHECK(all.bytes == layout.total_numel * 16);
  CHECK(mt::describe_resident(one, layout).find("optimizer state of the embedding (0.545 B of 7.616 B parameters)") == 0);
  CHECK(mt::describe_resident(three, layout).find("the embedding and layers 0-1 ") != std::string::npos);
  CHECK(mt::describe_resident(all, layout).find("every region") != std::string::npos);
}

TEST_CASE("the GPU plan of resident regions: slots for the rest, no gradient buffer in one pass", "[plan][resident]") {
  const mt::ModelSpec spec = qwen25_7b();
  const mt::ParamLayout layout = mt::make_param_layout(spec);
  mt::RunShape run = batch32();
  const mt::GpuPlan none = mt::plan_gpu(spec, run);
  run.resident_regions = 3;  // the embedding and layers 0-1: the slots still serve a layer; one pass
  const mt::GpuPlan three = mt::plan_gpu(spec, run);
  CHECK(three.weight_slots == none.weight_slots);
  CHECK(three.grad_buffers == none.grad_buffers - layout.regions[0].numel * 4);
  // Every layer resident: the slots and staging serve the head, and no layer buffer is needed.
  const auto regions = static_cast<int64_t>(layout.regions.size());
  run.resident_regions = regions - 1;
  const mt::GpuPlan layers = mt::plan_gpu(spec, run);
  CHECK(layers.weight_slots == (2 * 2 + 4) * layout.head_region().numel);
  CHECK(layers.grad_buffers == layout.head_region().numel * 4);
  run.resident_regions = regions;
  CHECK(mt::plan_gpu(spec, run).weight_slots == 0);
  CHECK(mt::plan_gpu(spec, run).grad_buffers == 0);
  // Several passes: every region's later passes go through a buffer.
  run.passes = 2;
  run.micro_batch_size = 16;
  CHECK(mt::plan_gpu(spec, run).grad_buffers ==
        (layout.embedding().numel + layout.head_region().numel + 2 * layout.largest_layer_numel) * 4 + (int64_t{64} << 20));
}

TEST_CASE("a run's resident state is what the GPU plan leaves free, and none where it cannot be", "[plan][resident]") {
  const mt::ModelSpec spec = qwen25_7b();
  const mt::RunShape run = batch32();
  const mt::ResidentPlan p = mt::plan_resident(spec, run, kH200, 1, true);
  const mt::ParamLayout layout = mt::make_param_layout(spec);
  const auto fits = [&](int64_t k) {
    mt::RunShape with = run;
    with.resident_regions = k;
    return mt::plan_gpu(spec, with).total() + mt::resident_prefix(layout, run.dtype, k).bytes + mt::kResidentMargin <=
           mt::usable_gpu_bytes(kH200);
  };
  CHECK(p.regions > 1);
  CHECK(p.regions < static_cast<int64_t>(layout.regions.size()));
  CHECK(fits(p.regions));
  for (int64_t k = p.regions + 1; k <= static_cast<int64_t>(layout.regions.size()); ++k) CHECK_FALSE(fits(k));
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

TEST_CASE("MoE shapes of issue 15 on the H200: layer 0's state fits, a one-layer model's all of it",
          "[plan][resident][moe]") {
  // Qwen3-30B-A3B, 10 layers, 64 × 4096 in micro-batches of 8 (cuDNN attention): the embedding alone beside one
  // backward call of the 8 sequences (9.6 GiB of workspace); the step's first pass waits for the optimizer, so
  // calls of 2 (2.4 GiB) make room for layer 0 too.
  const mt::ModelSpec qwen =
      mt::first_layers(mt::load_model_spec(MEGATRAIN_SOURCE_DIR "/configs/models/qwen3-30b-a3b.json"), 10);
  mt::RunShape run;
  run.stream_dtype = mt::DType::f32;
  run.seq_len = 4096;
  run.batch_size = 64;
  run.micro_batch_size = 8;
  run.passes = 1;
  run.checkpoint_interval = 1;
  run.recompute_layers = 0;
  run.cudnn_attention = run.cudnn_backward = true;
  const mt::ResidentPlan q = mt::plan_resident(qwen, run, kH200, 1, true);
  CHECK(q.regions == 2);
  CHECK(q.cudnn_call_batch == 2);
  CHECK(mt::describe_resident(q, mt::make_param_layout(qwen)).find("in calls of 2 sequence(s)") != std::string::npos);
  mt::RunShape whole = run;
  whole.cudnn_call_batch = 8;
  mt::RunShape two = run;
  two.cudnn_call_batch = 2;
  CHECK(mt::plan_gpu(qwen, two).attention_workspace < mt::plan_gpu(qwen, whole).attention_workspace / 3);
  CHECK(mt::plan_gpu(qwen, mt::with_resident(run, q)).attention_workspace == mt::plan_gpu(qwen, two).attention_workspace);
  // GPT-OSS-120B, 1 layer, 104 × 4096: every region, once no slot and no gradient buffer is needed for them.
  const mt::ModelSpec oss =
      mt::first_layers(mt::load_model_spec(MEGATRAIN_SOURCE_DIR "/configs/models/gpt-oss-120b.json"), 1);
  run.batch_size = 104;
  const mt::ResidentPlan o = mt::plan_resident(oss, run, kH200, 1, true);
  CHECK(o.regions == 3);
  CHECK(o.cudnn_call_batch == 0);  // one call of the micro-batch still fits
  // Qwen2.5-7B at 32 × 1024: its first pass waits for nothing once 22 regions are resident, so its calls stay whole.
  CHECK(mt::plan_resident(qwen25_7b(), batch32(), kH200, 1, true).cudnn_call_batch == 0);
}
