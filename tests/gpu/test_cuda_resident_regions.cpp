// GPU-resident optimizer state (kernels/runtime/resident_regions.h): the device AdamW kernel gives the host passes'
// p', m', v' and bf16 copy bit for bit; training a few AdamW steps (weight decay, clipping active, gradient
// accumulation passes, tied and untied, fp32 and bf16 compute, fp32 and bf16 stores) with any resident prefix of
// the store — none, the embedding, some layers, every region — leaves the store's master, moments and bf16 copy
// and every step's loss bitwise as with none.
#include <cstring>
#include <random>

#include "kernels/runtime/cuda_backend.h"
#include "kernels/runtime/pipeline.h"
#include "catch.h"
#include "engine/tiny_model.h"
#include "gpu/gpu_test_util.h"
#include "kernels/ops/kernels.h"
#include "optim/adamw.h"
#include "optim/optimizer.h"

using namespace mt;
using namespace mt::testing;

namespace {

template <typename T>
T* device_copy(const std::vector<T>& host) {
  void* p = nullptr;
  REQUIRE(cudaMalloc(&p, host.size() * sizeof(T)) == cudaSuccess);
  REQUIRE(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  return static_cast<T*>(p);
}

template <typename T>
std::vector<T> host_copy(const T* device, size_t n) {
  std::vector<T> host(n);
  REQUIRE(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
  return host;
}

struct State {
  std::vector<double> losses;
  std::vector<std::vector<float>> master, exp_avg, exp_avg_sq;
  std::vector<std::vector<std::uint16_t>> copy;
};

State train(DType compute, DType stream, bool tied, int64_t passes, int64_t resident) {
  std::unique_ptr<Backend> be = make_cuda_backend(compute, 0, mt::environment_switches());
  const ModelSpec spec = tiny_spec(3, tied);
  HostStore store(make_param_layout(spec), stream);
  fill_random(store, 5);
  EngineOptions o;
  o.passes = passes;
  o.checkpoint_interval = 2;
  o.max_positions = 32;
  OptimizerSettings settings;
  settings.weight_decay = 0.1;
  settings.max_grad_norm = 0.5;  // clips: the coefficient scales every gradient
  State s;
  {
    Engine engine(*be, spec, store, o, make_cuda_pipeline(*be, store, 2, resident));
    REQUIRE(store.resident_count() == resident);
    Optimizer opt(store, settings);
    for (int step = 0; step < 3; ++step) {
      s.losses.push_back(engine.forward_backward(tiny_batch(spec.vocab_size, 11 + step)).mean());
      const OptimizerReport report = opt.step(1e-2, {}, engine.gradient_sum_of_squares());
      CHECK(report.clip_coefficient < 1.0f);
    }
  }
  CHECK(store.resident_count() == 0);  // the pipeline has gone
  for (int64_t r = 0; r < store.num_regions(); ++r) {
    const int64_t n = store.numel(r);
    s.master.emplace_back(store.master(r), store.master(r) + n);
    s.exp_avg.emplace_back(store.exp_avg(r), store.exp_avg(r) + n);
    s.exp_avg_sq.emplace_back(store.exp_avg_sq(r), store.exp_avg_sq(r) + n);
    if (store.stream_bf16(r)) s.copy.emplace_back(store.stream_bf16(r), store.stream_bf16(r) + n);
  }
  return s;
}

}  // namespace

TEST_CASE("GPU-resident optimizer state: the device AdamW kernel is bitwise the host's adamw_update",
          "[gpu][resident]") {
  MT_REQUIRE_GPU();
  const int64_t n = 100003;
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> p(n), m(n), v(n), g(n);
  for (int64_t i = 0; i < n; ++i) {
    p[i] = d(rng);
    m[i] = 1e-3f * d(rng);
    v[i] = 1e-6f * std::abs(d(rng));
    g[i] = (i % 97 == 0 ? 1e-30f : 1e-2f) * d(rng);  // some tiny gradients: subnormal squares
  }
  for (const bool decay : {false, true}) {
    INFO("decay " << decay);
    AdamWStep hp;
    hp.lr = 3e-4;
    hp.weight_decay = 0.1;
    hp.step = 7;
    hp.grad_scale = 0.37f;
    std::vector<float> hp_p = p, hp_m = m, hp_v = v;
    std::vector<std::uint16_t> hp_copy(n);
    adamw_update(hp_p.data(), hp_m.data(), hp_v.data(), g.data(), n, hp, decay, hp_copy.data());
    float *dp = device_copy(p), *dm = device_copy(m), *dv = device_copy(v), *dg = device_copy(g);
    __nv_bfloat16* dc = device_copy(std::vector<__nv_bfloat16>(n));
    cuda::adamw_update(dp, dm, dv, dg, dc, n, adamw_coefficients(hp, decay), nullptr);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(host_copy(dp, n) == hp_p);
    CHECK(host_copy(dm, n) == hp_m);
    CHECK(host_copy(dv, n) == hp_v);
    const std::vector<__nv_bfloat16> copy = host_copy(dc, n);
    CHECK(std::memcmp(copy.data(), hp_copy.data(), n * 2) == 0);
    for (void* q : {static_cast<void*>(dp), static_cast<void*>(dm), static_cast<void*>(dv), static_cast<void*>(dg),
                    static_cast<void*>(dc)})
      cudaFree(q);
  }
}

TEST_CASE("GPU-resident optimizer state: any resident prefix trains the store bitwise as none does",
          "[gpu][pipeline][resident]") {
  MT_REQUIRE_GPU();
  struct Precision {
    DType compute, stream;
  };
  for (const Precision pr : {Precision{DType::f32, DType::f32}, Precision{DType::bf16, DType::f32},
                             Precision{DType::bf16, DType::bf16}}) {
    for (const bool tied : {false, true}) {
      for (const int64_t passes : {1, 2}) {
        INFO("compute " << dtype_name(pr.compute) << " store " << dtype_name(pr.stream) << " tied " << tied
                        << " passes " << passes);
        const State none = train(pr.compute, pr.stream, tied, passes, 0);
        const int64_t regions = make_param_layout(tiny_spec(3, tied)).regions.size();
        for (const int64_t resident : {int64_t{1}, int64_t{3}, regions}) {
          INFO("resident regions " << resident);
          const State some = train(pr.compute, pr.stream, tied, passes, resident);
          CHECK(some.losses == none.losses);
          CHECK(some.master == none.master);
          CHECK(some.exp_avg == none.exp_avg);
          CHECK(some.exp_avg_sq == none.exp_avg_sq);
          CHECK(some.copy == none.copy);
        }
      }
    }
  }
}
