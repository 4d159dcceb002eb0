// Optimizer benchmark (see bench_optim.h).
#include "cli/train/bench_optim.h"

#include <mpi.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "dist/check.h"
#include "dist/context.h"
#include "dist/numa_binding.h"
#include "optim/optimizer.h"
#include "store/host_store.h"

namespace mt {
namespace {

ParamLayout synthetic_layout(int64_t params, int64_t region) {
  ParamLayout layout;
  for (int64_t o = 0, r = 0; o < params; o += region, ++r) {
    const int64_t n = std::min(region, params - o);
    Region reg{RegionKind::decoder_layer, r, {}, n};
    reg.params.push_back({"bench.region." + std::to_string(r), {n}, 0, n, true, InitKind::normal});
    layout.regions.push_back(std::move(reg));
    layout.largest_region_numel = std::max(layout.largest_region_numel, n);
  }
  layout.total_numel = params;
  return layout;
}

// A value in [-scale, scale) from an element's global index (no state, so threads fill independently).
float hashed(uint64_t i, float scale) {
  i = (i + 0x9e3779b97f4a7c15ull) * 0xbf58476d1ce4e5b9ull;
  i ^= i >> 31;
  return scale * (static_cast<float>(i >> 40) / static_cast<float>(1 << 23) - 1.0f);
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double max_over_ranks(double v) {
  double m = 0;
  MT_CHECK_MPI(MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, dist::context().node));
  return m;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

void run_bench_optim(const BenchOptimOptions& o) {
  const dist::Context& ctx = dist::context();
  MT_REQUIRE(o.params > 0, "bench-optim: --params must be positive (got {})", o.params);
  MT_REQUIRE(o.steps > 0 && o.warmup >= 0, "bench-optim: --steps must be positive and --warmup not negative");
  MT_REQUIRE(ctx.size == ctx.node_size, "bench-optim: the job's ranks span several nodes; run it on one node");
  dist::log_bindings(ctx);
  const DType dtype = dtype_from_name(o.dtype);
  HostStore store(synthetic_layout(o.params, o.region), dtype);
  OptimizerSettings settings;
  settings.weight_decay = 0.01;
  Optimizer optimizer(store, settings);

  // Each rank fills its own slices: master and gradient; then a copy pass g -> m as the ceiling.
  for (int64_t r = 0; r < store.num_regions(); ++r) {
    const HostStore::Slice s = store.slice(r);
    const uint64_t base = static_cast<uint64_t>(r * o.region);
    float* p = store.master(r);
    float* g = store.grad(r);
#pragma omp parallel for schedule(static)
    for (int64_t i = s.begin; i < s.end; ++i) {
      p[i] = hashed(base + static_cast<uint64_t>(i), 0.02f);
      g[i] = hashed(~(base + static_cast<uint64_t>(i)), 1e-3f);
    }
  }
  MT_CHECK_MPI(MPI_Barrier(ctx.node));
  std::vector<double> copies;
  for (int64_t k = 0; k < o.warmup + o.steps; ++k) {
    MT_CHECK_MPI(MPI_Barrier(ctx.node));
    const double t0 = now();
    for (int64_t r = 0; r < store.num_regions(); ++r) {
      const HostStore::Slice s = store.slice(r);
      const float* g = store.grad(r);
      float* m = store.exp_avg(r);
#pragma omp parallel for simd schedule(static)
      for (int64_t i = s.begin; i < s.end; ++i) m[i] = g[i];
    }
    const double t = max_over_ranks(now() - t0);
    if (k >= o.warmup) copies.push_back(t);
  }

  std::vector<double> steps, norms, updates, moments;
  for (int64_t k = 0; k < o.warmup + o.steps; ++k) {
    MT_CHECK_MPI(MPI_Barrier(ctx.node));
    const double t0 = now();
    const OptimizerReport report = optimizer.step(1e-4);
    for (int64_t r = 0; r < store.num_regions(); ++r) store.wait_moments(r, report.pass);
    const double step = max_over_ranks(now() - t0);
    const double norm = max_over_ranks(report.norm_seconds);
    const double update = max_over_ranks(report.update_seconds);
    const double moment = max_over_ranks(report.moments_seconds);
    if (k < o.warmup) continue;
    steps.push_back(step);
    norms.push_back(norm);
    updates.push_back(update);
    moments.push_back(moment);
  }
  if (!ctx.is_root()) return;

  const double P = static_cast<double>(o.params);
  // Parameters pass: reads g, p, m, v, writes p (and bf16); moments pass: reads g, m, v, writes m, v.
  const double params_bytes = dtype == DType::bf16 ? 22.0 : 20.0, moments_bytes = 20.0;
  const double step_s = median(steps), norm_s = median(norms), params_s = median(updates), copy_s = median(copies);
  const double moments_s = median(moments), adamw_s = params_s + moments_s;
  const nlohmann::json result = {{"params", o.params},
                                 {"ranks", ctx.node_size},
                                 {"threads_rank0", omp_get_max_threads()},
                                 {"dtype", dtype_name(dtype)},
                                 {"steps", o.steps},
                                 {"step_s", step_s},
                                 {"norm_s", norm_s},
                                 {"adamw_s", adamw_s},
                                 {"params_per_s", P / adamw_s},
                                 {"adamw_gb_per_s", (params_bytes + moments_bytes) * P / adamw_s / 1e9},
                                 {"params_pass_s", params_s},
                                 {"params_pass_params_per_s", P / params_s},
                                 {"params_pass_gb_per_s", params_bytes * P / params_s / 1e9},
                                 {"moments_pass_s", moments_s},
                                 {"norm_gb_per_s", 4.0 * P / norm_s / 1e9},
                                 {"step_params_per_s", P / step_s},
                                 {"copy_gb_per_s", 8.0 * P / copy_s / 1e9}};
  if (o.json) {
    std::printf("%s\n", result.dump().c_str());
    return;
  }
  log::info("bench-optim: {:.3g} parameters on {} rank(s), {} streaming copy, median of {} steps", P, ctx.node_size,
            dtype_name(dtype), o.steps);
  log::info("  AdamW       {:8.4f} s  {:6.3f} G params/s  {:6.1f} GB/s ({} B/param)", adamw_s, P / adamw_s / 1e9,
            (params_bytes + moments_bytes) * P / adamw_s / 1e9, params_bytes + moments_bytes);
  log::info("   parameters {:8.4f} s  {:6.3f} G params/s  {:6.1f} GB/s ({} B/param: what the next forward waits for)",
            params_s, P / params_s / 1e9, params_bytes * P / params_s / 1e9, params_bytes);
  log::info("   moments    {:8.4f} s  {:6.3f} G params/s  {:6.1f} GB/s ({} B/param)", moments_s, P / moments_s / 1e9,
            moments_bytes * P / moments_s / 1e9, moments_bytes);
  log::info("  norm pass   {:8.4f} s  {:6.3f} G params/s  {:6.1f} GB/s (4 B/param)", norm_s, P / norm_s / 1e9,
            4.0 * P / norm_s / 1e9);
  log::info("  whole step  {:8.4f} s  {:6.3f} G params/s", step_s, P / step_s / 1e9);
  log::info("  copy        {:8.4f} s  {:6.1f} GB/s (8 B/param: the ceiling)", copy_s, 8.0 * P / copy_s / 1e9);
}

}  // namespace mt
