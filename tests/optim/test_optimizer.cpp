// The optimizer step on a one-rank host store: the global norm, clipping, skipped steps on NaN and Inf
// gradients (nothing changes, the step count does not advance, every region is still published), and
// the same result as per-slot AdamW, with fused and split passes alike. The MPI tests check that several ranks give bitwise the same.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "catch.h"
#include "optim/adamw.h"
#include "optim/grad_clip.h"
#include "optim/optimizer.h"
#include "store/host_store.h"

namespace {

// Two regions: a decayed matrix and an undecayed vector, then a region larger than one norm block.
mt::ParamLayout test_layout() {
  mt::ParamLayout l;
  mt::Region a{mt::RegionKind::embedding, -1, {}, 300, {}};
  a.params.push_back({"w", {10, 20}, 0, 200, true, mt::InitKind::normal, {}, {}});
  a.params.push_back({"b", {100}, 200, 100, false, mt::InitKind::zeros, {}, {}});
  mt::Region b{mt::RegionKind::decoder_layer, 0, {}, 9000, {}};
  b.params.push_back({"big", {9000}, 0, 9000, true, mt::InitKind::normal, {}, {}});
  l.regions = {a, b};
  l.total_numel = 9300;
  l.largest_region_numel = 9000;
  return l;
}

void fill(mt::HostStore& store, float grad_scale) {
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (int64_t r = 0; r < store.num_regions(); ++r)
    for (int64_t i = 0; i < store.numel(r); ++i) {
      store.master(r)[i] = d(rng);
      store.grad(r)[i] = grad_scale * d(rng);
    }
}

}  // namespace

TEST_CASE("the optimizer step is the exact global norm, clipping and per-slot AdamW", "[optimizer]") {
  mt::HostStore store(test_layout(), mt::DType::bf16);
  fill(store, 0.1f);
  mt::OptimizerSettings s;
  s.weight_decay = 0.1;
  s.max_grad_norm = 1.0;
  double ss = 0;
  std::vector<std::vector<float>> p, m, v, g;
  for (int64_t r = 0; r < store.num_regions(); ++r) {
    for (int64_t i = 0; i < store.numel(r); ++i) ss += double(store.grad(r)[i]) * store.grad(r)[i];
    p.emplace_back(store.master(r), store.master(r) + store.numel(r));
    m.emplace_back(store.numel(r), 0.0f);
    v.emplace_back(store.numel(r), 0.0f);
    g.emplace_back(store.grad(r), store.grad(r) + store.numel(r));
  }
  mt::Optimizer opt(store, s);
  const mt::OptimizerReport report = opt.step(1e-2);
  CHECK(!report.skipped);
  CHECK(report.pass == 1);
  CHECK(std::abs(report.grad_norm - std::sqrt(ss)) <= 1e-12 * std::sqrt(ss));
  CHECK(report.clip_coefficient == mt::clip_coefficient(report.grad_norm, 1.0));
  CHECK(report.clip_coefficient < 1.0f);

  mt::AdamWStep hp;
  hp.lr = 1e-2;
  hp.weight_decay = 0.1;
  hp.grad_scale = report.clip_coefficient;
  for (int64_t r = 0; r < store.num_regions(); ++r) {
    for (const mt::ParamSlot& slot : store.layout().regions[static_cast<size_t>(r)].params) {
      const auto o = static_cast<size_t>(slot.offset);
      mt::adamw_update(p[r].data() + o, m[r].data() + o, v[r].data() + o, g[r].data() + o, slot.numel, hp,
                       slot.weight_decay, nullptr);
    }
    CHECK(std::vector<float>(store.master(r), store.master(r) + store.numel(r)) == p[r]);
    for (int64_t i = 0; i < store.numel(r); ++i) REQUIRE(store.stream_bf16(r)[i] == mt::f32_to_bf16(p[r][i]));
  }
  store.wait_region(1, 1);  // published, parameters and moments
  store.wait_moments(1, 1);
}

TEST_CASE("fused and split update passes leave bitwise the same store, step after step", "[optimizer]") {
  mt::HostStore fused_store(test_layout(), mt::DType::bf16), split_store(test_layout(), mt::DType::bf16);
  mt::OptimizerSettings s;
  s.weight_decay = 0.1;
  s.passes = mt::UpdatePasses::fused;
  mt::Optimizer fused(fused_store, s);
  s.passes = mt::UpdatePasses::split;
  mt::Optimizer split(split_store, s);
  for (int step = 1; step <= 3; ++step) {
    fill(fused_store, 0.1f * static_cast<float>(step));  // a fresh draw of parameters and gradients each step
    fill(split_store, 0.1f * static_cast<float>(step));
    const mt::OptimizerReport a = fused.step(1e-2), b = split.step(1e-2);
    CHECK(a.moments_seconds == 0.0);
    CHECK(a.grad_norm == b.grad_norm);
    for (int64_t r = 0; r < fused_store.num_regions(); ++r) {
      fused_store.wait_moments(r, step);  // the fused pass publishes the moments with the parameters
      split_store.wait_moments(r, step);
      const auto n = static_cast<size_t>(fused_store.numel(r));
      auto same = [n](const auto* x, const auto* y) { return std::equal(x, x + n, y); };
      INFO("step " << step << " region " << r);
      CHECK(same(fused_store.master(r), split_store.master(r)));
      CHECK(same(fused_store.exp_avg(r), split_store.exp_avg(r)));
      CHECK(same(fused_store.exp_avg_sq(r), split_store.exp_avg_sq(r)));
      CHECK(same(fused_store.stream_bf16(r), split_store.stream_bf16(r)));
    }
  }
}

TEST_CASE("NaN and Inf gradients skip the step on every region, and the next step counts from 1", "[optimizer]") {
  for (float bad : {std::nanf(""), INFINITY, -INFINITY}) {
    mt::HostStore store(test_layout(), mt::DType::bf16);
    fill(store, 0.1f);
    std::vector<float> before(store.master(1), store.master(1) + store.numel(1));
    store.grad(1)[8000] = bad;
    mt::Optimizer opt(store, mt::OptimizerSettings{});
    bool called = false;
    const mt::OptimizerReport report = opt.step(1e-3, [&](const mt::OptimizerReport& r) { called = r.skipped; });
    INFO("bad gradient " << bad);
    CHECK(report.skipped);
    CHECK(called);
    CHECK(opt.updates_applied() == 0);
    CHECK(std::vector<float>(store.master(1), store.master(1) + store.numel(1)) == before);
    CHECK(store.exp_avg(1)[0] == 0.0f);
    store.wait_region(0, 1);  // still published: readers never wait forever on a skipped step
    store.wait_region(1, 1);

    store.grad(1)[8000] = 0.0f;
    const mt::OptimizerReport next = opt.step(1e-3);
    CHECK(!next.skipped);
    CHECK(opt.updates_applied() == 1);
    // First applied update: |Δp| = lr for every element with a non-zero gradient (bias-corrected Adam).
    CHECK(std::abs(std::abs(store.master(1)[0] - before[0]) - 1e-3f) < 1e-6f);
  }
}

TEST_CASE("a given Σg² (computed on the GPU) replaces the host norm pass exactly", "[optimizer]") {
  // Two identical stores: one computes the norm on the host, the other is told the same Σg² as its grad_norm².
  mt::HostStore host(test_layout(), mt::DType::bf16), given(test_layout(), mt::DType::bf16);
  fill(host, 0.1f);
  fill(given, 0.1f);
  mt::OptimizerSettings s;
  s.max_grad_norm = 1.0;
  mt::Optimizer by_host(host, s), by_given(given, s);
  const mt::OptimizerReport a = by_host.step(1e-2);
  const mt::OptimizerReport b = by_given.step(1e-2, {}, a.grad_norm * a.grad_norm);
  CHECK(b.grad_norm == std::sqrt(a.grad_norm * a.grad_norm));
  CHECK(b.clip_coefficient == mt::clip_coefficient(b.grad_norm, 1.0));
  if (b.clip_coefficient == a.clip_coefficient)
    for (int64_t r = 0; r < host.num_regions(); ++r)
      CHECK(std::vector<float>(host.master(r), host.master(r) + host.numel(r)) ==
            std::vector<float>(given.master(r), given.master(r) + given.numel(r)));
  given.wait_region(1, 1);

  // A non-finite given sum skips the step like a non-finite host norm.
  const mt::OptimizerReport skipped = by_given.step(1e-2, {}, std::nan(""));
  CHECK(skipped.skipped);
  CHECK(by_given.updates_applied() == 1);
  given.wait_region(1, 2);
}
