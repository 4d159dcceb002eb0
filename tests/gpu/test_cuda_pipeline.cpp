// The CUDA engine with the weight-streaming pipeline against the CPU reference, on a tiny model with every
// optional feature (q/k norm, biases, GQA, sliding window, yarn RoPE), tied and untied: fp32 gradients and loss
// within 1e-5 of the CPU's; bitwise identical for 2, 3 and 4 weight slots and for layers that save their
// internals instead of recomputing them; within rounding for any micro-batch; gradient accumulation passes
// summed on the GPU give the CPU's gradients and the Σg² of their sum.
#include <cmath>
#include <limits>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/pipeline.h"
#include "catch.h"
#include "engine/tiny_model.h"
#include "gpu/gpu_test_util.h"

using namespace mt;
using namespace mt::testing;

namespace {

using Run = EngineRun;

Run run_engine(bool tied, bool cuda, int64_t slots, int64_t micro_batch,
               int64_t recompute_layers = std::numeric_limits<int64_t>::max(), int64_t passes = 1) {
  std::unique_ptr<Backend> be = cuda ? make_cuda_backend(DType::f32) : make_cpu_backend();
  EngineOptions o;
  o.passes = passes;
  o.checkpoint_interval = 2;
  o.micro_batch_size = micro_batch;
  o.recompute_layers = recompute_layers;
  TransfersFactory pipeline;
  if (cuda) pipeline = [slots](Backend& b, HostStore& store) { return make_cuda_pipeline(b, store, slots); };
  return run_tiny_engine(*be, tied, o, DType::f32, pipeline);
}

}  // namespace

TEST_CASE("CUDA engine and pipeline match the CPU reference in fp32", "[gpu][pipeline]") {
  MT_REQUIRE_GPU();
  for (const bool tied : {false, true}) {
    INFO("tied " << tied);
    const Run cpu = run_engine(tied, false, 2, 0);
    const Run two = run_engine(tied, true, 2, 0);
    CHECK(std::abs(two.loss - cpu.loss) <= 1e-5 * cpu.loss);
    CHECK(worst_region_difference(two.grads, cpu.grads) <= 1e-5);
    for (const int64_t slots : {3, 4}) {
      const Run more = run_engine(tied, true, slots, 0);
      CHECK(more.loss == two.loss);
      CHECK(more.grads == two.grads);
    }
    for (const int64_t mb : {1, 3}) {
      const Run split = run_engine(tied, true, 2, mb);
      CHECK(std::abs(split.loss - two.loss) <= 1e-6 * two.loss);
      CHECK(worst_region_difference(split.grads, two.grads) <= 1e-5);
      for (const int64_t recompute : {0, 2}) {
        INFO("micro-batch " << mb << " recompute_layers " << recompute);
        const Run saved = run_engine(tied, true, 2, mb, recompute);
        CHECK(saved.loss == split.loss);
        CHECK(saved.grads == split.grads);
      }
    }
  }
}

TEST_CASE("CUDA gradient accumulation: passes summed on the GPU match the CPU, and the norm is of the sum",
          "[gpu][pipeline]") {
  MT_REQUIRE_GPU();
  for (const bool tied : {false, true}) {
    const Run one = run_engine(tied, true, 2, 0);
    REQUIRE(one.sum_of_squares);
    for (const int64_t passes : {2, 4}) {
      INFO("tied " << tied << " passes " << passes);
      const Run cpu = run_engine(tied, false, 2, 0, std::numeric_limits<int64_t>::max(), passes);
      const Run gpu = run_engine(tied, true, 2, 0, std::numeric_limits<int64_t>::max(), passes);
      CHECK(std::abs(gpu.loss - cpu.loss) <= 1e-5 * cpu.loss);
      CHECK(worst_region_difference(gpu.grads, cpu.grads) <= 1e-5);
      CHECK(worst_region_difference(gpu.grads, one.grads) <= 1e-5);
      CHECK(!cpu.sum_of_squares);  // the CPU sink leaves the norm to the optimizer's host pass
      REQUIRE(gpu.sum_of_squares);
      double ss = 0;
      for (const auto& g : gpu.grads)
        for (float x : g) ss += static_cast<double>(x) * x;
      CHECK(std::abs(*gpu.sum_of_squares - ss) <= 1e-12 * ss);
    }
  }
}
