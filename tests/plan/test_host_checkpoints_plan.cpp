// The memory plan of activation checkpoints in host RAM (engine/checkpoint_store.h): the GPU keeps two staging
// buffers, host RAM the checkpoints beside the store; automatic places them on the host exactly when the plan with
// them on the GPU does not fit and the one with them on the host does; the longest trainable sequence with them on
// the host, bounded by one layer's GPU workspace and by host RAM, for Qwen2.5-3B and -7B on an H200.
#include <limits>

#include "catch.h"
#include "cli/train/preflight.h"
#include "model/model_spec.h"
#include "plan/resource_advice.h"
#include "plan/sequence_limit.h"

namespace {

mt::ModelSpec model(const char* name) {
  return mt::load_model_spec(std::string(MEGATRAIN_SOURCE_DIR "/configs/models/") + name + ".json");
}

constexpr int64_t kGiB = int64_t{1} << 30;

// One sequence of `seq` tokens, every layer recomputing.
mt::RunShape one_sequence(int64_t seq, int64_t interval, mt::CheckpointPlacement placement) {
  mt::RunShape r;
  r.stream_dtype = mt::DType::f32;
  r.batch_size = r.passes = r.micro_batch_size = 1;
  r.seq_len = seq;
  r.checkpoint_interval = interval;
  r.recompute_layers = std::numeric_limits<int64_t>::max();
  r.checkpoints = placement;
  return r;
}

}  // namespace

TEST_CASE("host checkpoints: two staging buffers on the GPU, the checkpoints in host RAM", "[plan][host-checkpoints]") {
  const mt::ModelSpec spec = model("qwen2.5-3b");
  mt::RunShape r = one_sequence(1, 5, mt::CheckpointPlacement::gpu);
  r.batch_size = 8;
  r.micro_batch_size = 0;
  r.seq_len = 4096;
  const mt::MemoryPlan on_gpu = mt::plan_memory(spec, r);
  r.checkpoints = mt::CheckpointPlacement::host;
  const mt::MemoryPlan on_host = mt::plan_memory(spec, r);
  const int64_t n = 8 * 4096 * spec.hidden_size * 2;  // one checkpoint of the pass, bf16
  CHECK(on_gpu.gpu.checkpoints == 8 * n);             // ceil(36 / 5)
  CHECK(on_gpu.gpu.host_checkpoints == 0);
  CHECK(on_gpu.host.checkpoint_bytes == 0);
  CHECK(on_host.gpu.checkpoints == 2 * n);
  CHECK(on_host.gpu.host_checkpoints == 8 * n);
  CHECK(on_host.gpu.total() == on_gpu.gpu.total() - 6 * n);
  CHECK(on_host.host.checkpoint_bytes == 8 * n);
  CHECK(on_host.host.ram_bytes() == on_gpu.host.ram_bytes() + 8 * n);
  // The CPU backend's host bytes: the checkpoints either way, the staging buffers on top (fp32).
  CHECK(mt::cpu_backend_host_bytes(spec, r) == mt::cpu_backend_host_bytes(spec, [&] {
          mt::RunShape g = r;
          g.checkpoints = mt::CheckpointPlacement::gpu;
          return g;
        }()) + 2 * (n * 2));
}

TEST_CASE("host checkpoints count against host RAM in the advice", "[plan][host-checkpoints]") {
  const mt::ModelSpec spec = model("qwen2.5-3b");
  mt::RunShape r = one_sequence(262144, 1, mt::CheckpointPlacement::host);
  // 36 checkpoints of 262 144 tokens × 2048 × 2 B = 36 GiB beside a 46 GiB store: 64 GiB of RAM holds the store
  // (57.6 GiB usable) but not both.
  const mt::ResourceAdvice fits = mt::advise(spec, r, {139 * kGiB, 125 * kGiB});
  CHECK(fits.plan.host.checkpoint_bytes == 36 * kGiB);
  CHECK(fits.host_fits);
  const mt::ResourceAdvice short_ram = mt::advise(spec, r, {139 * kGiB, 64 * kGiB});
  CHECK(!short_ram.host_fits);
  CHECK_THAT(short_ram.shortfall, mt_test::contains("host RAM: the store needs 45.98 GiB and the activation "
                                                    "checkpoints (training.activation_checkpoints host) 36.00 GiB but "
                                                    "57.60 GiB of 64.00 GiB is usable"));
  r.checkpoints = mt::CheckpointPlacement::gpu;
  CHECK(mt::advise(spec, r, {139 * kGiB, 64 * kGiB}).host_fits);
}

TEST_CASE("automatic placement moves the checkpoints to the host exactly when they do not fit the GPU",
          "[plan][host-checkpoints]") {
  const mt::ModelSpec spec = model("qwen2.5-3b");
  const int64_t gpu = 139 * kGiB, usable = mt::usable_gpu_bytes(gpu);
  int on_gpu = 0, on_host = 0;
  for (const int64_t seq : {262144, 524288, 786432, 1048576, 1310720, 1572864, 1835008}) {
    INFO("seq " << seq);
    mt::RunShape r = one_sequence(seq, 3, mt::CheckpointPlacement::automatic);
    mt::resolve_auto(spec, r, gpu, false);
    const bool gpu_fits = mt::plan_gpu(spec, one_sequence(seq, 3, mt::CheckpointPlacement::gpu)).total() <= usable;
    const bool host_fits = mt::plan_gpu(spec, one_sequence(seq, 3, mt::CheckpointPlacement::host)).total() <= usable;
    CHECK(r.checkpoints == (!gpu_fits && host_fits ? mt::CheckpointPlacement::host : mt::CheckpointPlacement::gpu));
    (r.checkpoints == mt::CheckpointPlacement::host ? on_host : on_gpu) += 1;
  }
  CHECK(on_gpu == 5);   // 262 144 .. 1 048 576 fit on the GPU; 1 835 008 fits neither way
  CHECK(on_host == 2);  // 1 310 720 and 1 572 864 only with the checkpoints on the host
  // The CPU backend (no GPU memory) keeps them in backend memory; a forced placement stays.
  mt::RunShape cpu = one_sequence(1048576, 3, mt::CheckpointPlacement::automatic);
  mt::resolve_auto(spec, cpu, 0, false);
  CHECK(cpu.checkpoints == mt::CheckpointPlacement::gpu);
  for (const auto forced : {mt::CheckpointPlacement::gpu, mt::CheckpointPlacement::host}) {
    mt::RunShape r = one_sequence(262144, 3, forced);
    mt::resolve_auto(spec, r, gpu, false);
    CHECK(r.checkpoints == forced);
  }
}

TEST_CASE("the longest sequence with the checkpoints on the host: GPU workspace and host RAM bound it",
          "[plan][host-checkpoints][longseq]") {
  struct Case {
    const char* model;
    int64_t ram_gib, gpu_tokens, gpu_interval, host_tokens, host_interval;
  };
  for (const Case& c : {Case{"qwen2.5-3b", 125, 1111040, 6, 1453056, 3}, Case{"qwen2.5-3b", 1500, 1111040, 6, 1617920, 1},
                        Case{"qwen2.5-7b", 125, 617472, 4, 0, 0}, Case{"qwen2.5-7b", 1500, 617472, 4, 867328, 1}}) {
    INFO(c.model << " with " << c.ram_gib << " GiB of RAM");
    const mt::ModelSpec spec = model(c.model);
    const mt::Machine h200{139 * kGiB, c.ram_gib * kGiB};
    mt::RunShape run;  // as calc-resource plans it: the fp32 master streams, the interval chosen
    run.stream_dtype = mt::DType::f32;
    run.checkpoint_interval = 0;
    const mt::SequenceLimit s = mt::longest_trainable_sequence(spec, run, h200);
    CHECK(s.memory_tokens == c.gpu_tokens);
    CHECK(s.checkpoint_interval == c.gpu_interval);
    CHECK(s.host_memory_tokens == c.host_tokens);
    CHECK(s.host_checkpoint_interval == c.host_interval);
    if (s.host_memory_tokens == 0) continue;
    CHECK(s.host_memory_tokens % mt::kSequenceStep == 0);
    const mt::GpuPlan at = mt::plan_gpu(spec, one_sequence(s.host_memory_tokens, s.host_checkpoint_interval,
                                                           mt::CheckpointPlacement::host));
    CHECK(s.host_gpu_bytes == at.total());
    CHECK(s.host_checkpoint_bytes == at.host_checkpoints);
    const int64_t room = static_cast<int64_t>(static_cast<double>(h200.ram_bytes) * mt::kHostUsableShare) -
                         mt::plan_host(spec, mt::DType::f32, 1).ram_bytes();
    CHECK(at.total() <= mt::usable_gpu_bytes(h200.gpu_bytes));
    CHECK(at.host_checkpoints <= room);
    // A step longer fits at no interval.
    for (int64_t i = 1; i <= spec.num_layers; ++i) {
      const mt::GpuPlan longer = mt::plan_gpu(spec, one_sequence(s.host_memory_tokens + mt::kSequenceStep, i,
                                                                 mt::CheckpointPlacement::host));
      CHECK((longer.total() > mt::usable_gpu_bytes(h200.gpu_bytes) || longer.host_checkpoints > room));
    }
    CHECK(s.longest_with_host_checkpoints() == std::min(s.host_memory_tokens, spec.max_position_embeddings));
  }
}

TEST_CASE("preflight counts host checkpoints against the available RAM", "[plan][host-checkpoints][preflight]") {
  const mt::ModelSpec spec = model("qwen2.5-3b");
  mt::MachineLimits m;
  m.mem_available = 64 * kGiB;
  m.gpu_bytes = 139 * kGiB;
  mt::RunShape r = one_sequence(262144, 1, mt::CheckpointPlacement::gpu);
  CHECK(mt::preflight_shortfall(spec, r, true, m).empty());
  r.checkpoints = mt::CheckpointPlacement::host;
  CHECK_THAT(mt::preflight_shortfall(spec, r, true, m),
             mt_test::contains("host RAM: the run needs 81.98 GiB (16 B/parameter × 3.086 B parameters plus 36.00 GiB "
                               "of activation checkpoints) but only 64.00 GiB is available (MemAvailable)"));
}
