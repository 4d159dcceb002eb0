// Activation checkpoints in page-locked host memory on CUDA (kernels/runtime/host_checkpoints.h) against checkpoints in
// device memory, through the weight-streaming pipeline: bitwise the same loss and gradients in fp32 and bf16, for
// checkpoint intervals 1 (three checkpoints: the backward copies the first back in while the second segment runs)
// and 2, micro-batches of 1 and auto, one and two passes, two steps on one engine (the slots reused); the CPU
// reference's host placement agrees with the CUDA one as the device placement does.
#include <cmath>
#include <limits>

#include "kernels/runtime/cuda_backend.h"
#include "kernels/runtime/host_checkpoints.h"
#include "kernels/runtime/pipeline.h"
#include "catch.h"
#include "engine/tiny_model.h"
#include "gpu/gpu_test_util.h"

using namespace mt;
using namespace mt::testing;

namespace {

struct Run {
  std::vector<double> losses;
  std::vector<std::vector<float>> grads;  // after the last step
  int64_t checkpoint_bytes = 0;
};

Run run(bool cuda, DType dtype, CheckpointPlacement placement, int64_t interval, int64_t micro_batch, int64_t passes) {
  std::unique_ptr<Backend> be = cuda ? make_cuda_backend(dtype, 0, mt::environment_switches()) : make_cpu_backend();
  const ModelSpec spec = tiny_spec(3, false);
  const ParamLayout layout = make_param_layout(spec);
  HostStore store(layout, cuda ? dtype : DType::f32);
  fill_random(store, 21);
  EngineOptions o;
  o.max_positions = 32;
  o.checkpoint_interval = interval;
  o.micro_batch_size = micro_batch;
  o.passes = passes;
  o.checkpoints = placement;
  Run r;
  {
    EngineTransfers t;
    if (cuda) {
      t = make_cuda_pipeline(*be, store, 2);
      if (placement == CheckpointPlacement::host) t.checkpoints = make_cuda_host_checkpoints(*be);
    }
    Engine engine(*be, spec, store, o, std::move(t));
    for (uint32_t step = 0; step < 2; ++step)
      r.losses.push_back(engine.forward_backward(tiny_batch(spec.vocab_size, 4 + step)).mean());
    r.checkpoint_bytes = engine.checkpoint_bytes_moved();
  }
  for (int64_t reg = 0; reg < store.num_regions(); ++reg)
    r.grads.emplace_back(store.grad(reg), store.grad(reg) + layout.regions[static_cast<size_t>(reg)].numel);
  return r;
}

}  // namespace

TEST_CASE("CUDA checkpoints in page-locked host memory train bitwise like checkpoints on the GPU",
          "[gpu][pipeline][host-checkpoints]") {
  MT_REQUIRE_GPU();
  for (const DType dtype : {DType::f32, DType::bf16})
    for (const int64_t interval : {1, 2})
      for (const int64_t micro_batch : {0, 1})
        for (const int64_t passes : {1, 2}) {
          INFO(dtype_name(dtype) << " checkpoint_interval " << interval << " micro_batch " << micro_batch << " passes "
                                 << passes);
          const Run gpu = run(true, dtype, CheckpointPlacement::gpu, interval, micro_batch, passes);
          const Run host = run(true, dtype, CheckpointPlacement::host, interval, micro_batch, passes);
          CHECK(host.losses == gpu.losses);
          CHECK(host.grads == gpu.grads);
          CHECK(gpu.checkpoint_bytes == 0);
          CHECK(host.checkpoint_bytes > 0);
          if (dtype != DType::f32) continue;
          const Run cpu = run(false, DType::f32, CheckpointPlacement::host, interval, micro_batch, passes);
          CHECK(cpu.checkpoint_bytes == host.checkpoint_bytes);  // the same copies, in the same places
          for (size_t s = 0; s < cpu.losses.size(); ++s) CHECK(std::abs(host.losses[s] - cpu.losses[s]) <= 1e-5 * cpu.losses[s]);
          CHECK(worst_region_difference(host.grads, cpu.grads) <= 1e-5);
        }
}
