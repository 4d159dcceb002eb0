// The CUDA engine with the weight-streaming pipeline against the CPU reference, on a tiny model with every
// optional feature (q/k norm, biases, GQA, sliding window, yarn RoPE), tied and untied: fp32 gradients and loss
// within 1e-5 of the CPU's; bitwise identical for 2, 3 and 4 weight slots and for layers that save their
// internals instead of recomputing them; within rounding for any micro-batch; gradient accumulation passes
// summed on the GPU give the CPU's gradients and the Σg² of their sum; the optimizer's publications are waited for
// in the copy streams, not on the engine's thread.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "kernels/runtime/cuda_backend.h"
#include "kernels/runtime/pipeline.h"
#include "catch.h"
#include "engine/tiny_model.h"
#include "gpu/gpu_test_util.h"

using namespace mt;
using namespace mt::testing;

namespace {

using Run = EngineRun;

Run run_engine(bool tied, bool cuda, int64_t slots, int64_t micro_batch,
               int64_t recompute_layers = std::numeric_limits<int64_t>::max(), int64_t passes = 1) {
  std::unique_ptr<Backend> be = cuda ? make_cuda_backend(DType::f32, 0, mt::environment_switches()) : make_cpu_backend();
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

// The optimizer's publications are waited for in the copy streams, not on the engine's thread: acquire() of a region
// the optimizer has not yet published returns at once, and its copy, once the compute stream reaches it, holds what
// the store held when it was published; finish() of a gradient whose moments are unpublished returns at once, and
// its D2H lands only after they are. (A blocking wait would hold the engine until the safety publisher, seconds on.)
TEST_CASE("CUDA pipeline: copies wait for the optimizer in their streams, not on the engine's thread",
          "[gpu][pipeline]") {
  MT_REQUIRE_GPU();
  auto be = make_cuda_backend(DType::f32, 0, mt::environment_switches());
  const ParamLayout layout = make_param_layout(tiny_spec(2, false));
  HostStore store(layout, DType::f32);
  fill_random(store, 5);
  EngineTransfers t = make_cuda_pipeline(*be, store, 2);
  const int64_t r = 1, n = store.numel(r);
  store.set_required_version(1);
  for (int64_t q = 0; q < store.num_regions(); ++q)
    if (q != r) store.publish_slice(q, 1);
  std::atomic<bool> published{false};
  const auto publish = [&] {  // the optimizer's update of region r, then its publication
    if (published.exchange(true)) return;
    std::fill(store.master(r), store.master(r) + n, 0.25f);
    store.publish_slice(r, 1);
  };
  const auto t0 = std::chrono::steady_clock::now();
  std::thread safety([&] {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    publish();
  });
  const auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  t.weights->plan({0, r});
  t.weights->acquire(0);
  t.weights->release(0);
  const void* w = t.weights->acquire(r);
  CHECK(seconds() < 1.0);
  CHECK_FALSE(published.load());
  publish();
  std::vector<float> got(static_cast<size_t>(n));
  be->download(got.data(), w, n * 4);
  CHECK(std::all_of(got.begin(), got.end(), [](float x) { return x == 0.25f; }));
  t.weights->release(r);
  // The gradient: its accumulator is 1.5 everywhere; the store's gradient stays as it was until the moments of the
  // required version are published.
  std::vector<float> ones(static_cast<size_t>(n), 1.5f);
  std::fill(store.grad(r), store.grad(r) + n, -1.f);
  for (int64_t q = 0; q < store.num_regions(); ++q)
    if (q != r) store.publish_moments(q, 1);
  float* acc = t.grads->begin(r);
  be->upload(acc, ones.data(), n * 4);
  const auto t1 = std::chrono::steady_clock::now();
  t.grads->finish(r, true);
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count() < 1.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(store.grad(r)[0] == -1.f);
  store.publish_moments(r, 1);
  t.grads->wait();
  CHECK(std::all_of(store.grad(r), store.grad(r) + n, [](float x) { return x == 1.5f; }));
  safety.join();
}
