// Optimizer benchmark (see bench_optim.h).
#include "cli/bench/bench_optim.h"

#include <mpi.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "core/median.h"
#include "dist/check.h"
#include "dist/context.h"
#include "dist/numa_binding.h"
#include "optim/optimizer.h"
#include "store/host_store.h"
#include "store/tier_probe.h"

namespace mt {
namespace {

ParamLayout synthetic_layout(int64_t params, int64_t region) {
  ParamLayout layout;
  for (int64_t o = 0, r = 0; o < params; o += region, ++r) {
    const int64_t n = std::min(region, params - o);
    Region reg{RegionKind::decoder_layer, r, {}, n, {}};
    reg.params.push_back({"bench.region." + std::to_string(r), {n}, 0, n, true, InitKind::normal, {}, {}});
    layout.regions.push_back(std::move(reg));
    layout.largest_region_numel = std::max(layout.largest_region_numel, n);
    layout.largest_layer_numel = layout.largest_region_numel;
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

// Medians over the timed steps, the slowest rank's each time.
struct StepTimes {
  double step = 0, norm = 0, params = 0, moments = 0;  // params: the (fused or parameters) pass
};

StepTimes time_optimizer(HostStore& store, OptimizerSettings settings, UpdatePasses passes, const BenchOptimOptions& o) {
  settings.passes = passes;
  Optimizer optimizer(store, settings);
  std::vector<double> steps, norms, params, moments;
  for (int64_t k = 0; k < o.warmup + o.steps; ++k) {
    MT_CHECK_MPI(MPI_Barrier(dist::context().node));
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
    params.push_back(update);
    moments.push_back(moment);
  }
  return {median(steps), median(norms), median(params), median(moments)};
}

}  // namespace

void run_bench_optim(const BenchOptimOptions& o) {
  const dist::Context& ctx = dist::context();
  MT_REQUIRE(o.params > 0, "bench-optim: --params must be positive (got {})", o.params);
  MT_REQUIRE(o.steps > 0 && o.warmup >= 0, "bench-optim: --steps must be positive and --warmup not negative");
  MT_REQUIRE(ctx.size == ctx.node_size, "bench-optim: the job's ranks span several nodes; run it on one node");
  dist::log_bindings(ctx);
  const DType dtype = dtype_from_name(o.dtype);
  const RuntimeSwitches switches = environment_switches();  // no config: the variables alone, once
  const TierSettings tier{offload_mode_from_name(o.offload), o.offload_paths, "bench-optim", switches.tier_io};
  MT_REQUIRE(tier.mode == OffloadMode::none || !o.offload_paths.empty(),
             "bench-optim: --offload {} needs --offload-paths", o.offload);
  MT_REQUIRE(!offloads_master(tier.mode) || dtype == DType::bf16,
             "bench-optim: --offload optimizer+master streams the bf16 copy: add --dtype bfloat16");
  const ParamLayout layout = synthetic_layout(o.params, o.region);
  if (ctx.is_root() && tier.mode != OffloadMode::none) {
    const std::string shortfall = tier_path_shortfall(layout, tier, ctx.node_size);
    MT_REQUIRE(shortfall.empty(), "bench-optim: {}", shortfall);
  }
  // The disk's ceiling first, on rank 0 alone, before the store's files take the space.
  DiskCeiling disk;
  if (ctx.is_root() && tier.mode != OffloadMode::none)
    disk = measure_disk_ceiling(o.offload_paths, static_cast<int64_t>(o.probe_gb * 1e9), switches.tier_io);
  MT_CHECK_MPI(MPI_Barrier(ctx.node));
  HostStore store(layout, dtype, tier);
  OptimizerSettings settings;
  settings.weight_decay = 0.01;

  // Each rank fills its own slices: master and gradient; then a copy pass g -> m as the ceiling.
  for (int64_t r = 0; r < store.num_regions(); ++r) {
    const HostStore::Slice s = store.slice(r);
    const uint64_t base = static_cast<uint64_t>(r * o.region);
    float* p = store.master(r);  // null on the tier (optimizer+master): its zeros
    float* g = store.grad(r);
#pragma omp parallel for schedule(static)
    for (int64_t i = s.begin; i < s.end; ++i) {
      if (p) p[i] = hashed(base + static_cast<uint64_t>(i), 0.02f);
      g[i] = hashed(~(base + static_cast<uint64_t>(i)), 1e-3f);
    }
  }
  MT_CHECK_MPI(MPI_Barrier(ctx.node));
  if (store.tier()) {
    const int64_t read0 = store.tier()->bytes_read() + store.tier()->bytes_written();
    const StepTimes tiered = time_optimizer(store, settings, UpdatePasses::fused, o);
    double traffic = static_cast<double>(store.tier()->bytes_read() + store.tier()->bytes_written() - read0), all = 0;
    MT_CHECK_MPI(MPI_Allreduce(&traffic, &all, 1, MPI_DOUBLE, MPI_SUM, ctx.node));
    if (!ctx.is_root()) return;
    const double per_step = all / static_cast<double>(o.warmup + o.steps);
    const double gbs = per_step / tiered.params / 1e9;
    const nlohmann::json result = {{"params", o.params}, {"ranks", ctx.node_size}, {"dtype", dtype_name(dtype)},
                                   {"offload", o.offload}, {"steps", o.steps}, {"io", store.tier()->io_name()},
                                   {"direct_io", store.tier()->direct_io()},
                                   {"update_s", tiered.params}, {"step_s", tiered.step}, {"norm_s", tiered.norm},
                                   {"state_traffic_bytes_per_step", per_step}, {"state_traffic_gb_per_s", gbs},
                                   {"disk_write_gb_per_s", disk.write_gbs}, {"disk_read_gb_per_s", disk.read_gbs},
                                   {"disk_mixed_gb_per_s", disk.mixed_gbs()},
                                   {"fraction_of_ceiling", disk.mixed_gbs() > 0 ? gbs / disk.mixed_gbs() : 0.0},
                                   {"params_per_s", static_cast<double>(o.params) / tiered.params}};
    if (o.json) {
      std::printf("%s\n", result.dump().c_str());
      return;
    }
    log::info("bench-optim: {:.3g} parameters on {} rank(s), stream dtype {}, store.offload {} on {} ({}, {}), median "
              "of {} steps", static_cast<double>(o.params), ctx.node_size, dtype_name(dtype), o.offload,
              fmt::format("{}", fmt::join(o.offload_paths, ", ")), store.tier()->io_name(),
              store.tier()->direct_io() ? "O_DIRECT" : "buffered", o.steps);
    log::info("  AdamW over the tier {:8.4f} s  {:6.3f} G params/s  state traffic {:.2f} GB per step, {:.2f} GB/s",
              tiered.params, static_cast<double>(o.params) / tiered.params / 1e9, per_step / 1e9, gbs);
    log::info("  disk ceiling (probe, {}): write {:.2f} GB/s, read {:.2f} GB/s, a step's read+write mix {:.2f} GB/s: "
              "the update reaches {:.0f} %", disk.direct ? "O_DIRECT" : "buffered", disk.write_gbs, disk.read_gbs,
              disk.mixed_gbs(), disk.mixed_gbs() > 0 ? 100.0 * gbs / disk.mixed_gbs() : 0.0);
    log::info("  {:<18} {:8.4f} s (norm + AdamW over the tier)", "whole step", tiered.step);
    return;
  }
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
  const StepTimes fused = time_optimizer(store, settings, UpdatePasses::fused, o);
  const StepTimes split = time_optimizer(store, settings, UpdatePasses::split, o);
  if (!ctx.is_root()) return;

  const double P = static_cast<double>(o.params), copy_s = median(copies);
  // Fused: reads g, p, m, v, writes p, m, v (and bf16). Split: the parameters pass reads g, p, m, v, writes p
  // (and bf16); the moments pass reads g, m, v, writes m, v.
  const double bf16_bytes = dtype == DType::bf16 ? 2.0 : 0.0;
  const double fused_bytes = 28.0 + bf16_bytes, params_bytes = 20.0 + bf16_bytes, moments_bytes = 20.0;
  const double split_s = split.params + split.moments;
  const nlohmann::json result = {{"params", o.params},
                                 {"ranks", ctx.node_size},
                                 {"threads_rank0", omp_get_max_threads()},
                                 {"dtype", dtype_name(dtype)},
                                 {"steps", o.steps},
                                 {"adamw_s", fused.params},
                                 {"params_per_s", P / fused.params},
                                 {"adamw_gb_per_s", fused_bytes * P / fused.params / 1e9},
                                 {"step_s", fused.step},
                                 {"step_params_per_s", P / fused.step},
                                 {"norm_s", fused.norm},
                                 {"norm_gb_per_s", 4.0 * P / fused.norm / 1e9},
                                 {"split_adamw_s", split_s},
                                 {"split_params_per_s", P / split_s},
                                 {"params_pass_s", split.params},
                                 {"params_pass_params_per_s", P / split.params},
                                 {"params_pass_gb_per_s", params_bytes * P / split.params / 1e9},
                                 {"moments_pass_s", split.moments},
                                 {"moments_pass_gb_per_s", moments_bytes * P / split.moments / 1e9},
                                 {"split_step_s", split.step},
                                 {"copy_gb_per_s", 8.0 * P / copy_s / 1e9}};
  if (o.json) {
    std::printf("%s\n", result.dump().c_str());
    return;
  }
  auto row = [P](const char* name, double s, double bytes, const char* what) {
    log::info("  {:<18} {:8.4f} s  {:6.3f} G params/s  {:6.1f} GB/s ({} B/param{})", name, s, P / s / 1e9,
              bytes * P / s / 1e9, bytes, what);
  };
  log::info("bench-optim: {:.3g} parameters on {} rank(s), stream dtype {}, median of {} steps", P, ctx.node_size,
            dtype_name(dtype), o.steps);
  row("AdamW, fused", fused.params, fused_bytes, ": the CPU engine's update");
  row("AdamW, split", split_s, params_bytes + moments_bytes, ": the GPU engine's update");
  row(" parameters pass", split.params, params_bytes, ": what the next forward waits for");
  row(" moments pass", split.moments, moments_bytes, ": during the next head and backward");
  row("norm pass", fused.norm, 4.0, "");
  log::info("  {:<18} {:8.4f} s  {:6.3f} G params/s (norm + fused AdamW)", "whole step", fused.step,
            P / fused.step / 1e9);
  log::info("  {:<18} {:8.4f} s  {:6.1f} GB/s (8 B/param: the ceiling)", "copy", copy_s, 8.0 * P / copy_s / 1e9);
}

}  // namespace mt
