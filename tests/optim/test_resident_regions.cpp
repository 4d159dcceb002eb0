// The optimizer with regions a device holds (optim/resident_regions.h), through a host stand-in for the device that
// keeps its own copy of each resident region's state: the optimizer hands it exactly the leading regions, once a
// step, with the step's coefficients (and the skip of a non-finite norm), runs its own passes over the others only
// (never touching the resident regions' state in the store, which follows at sync_resident), publishes every region
// each step, and requires the norm to be given (the resident gradients are not in the store); after sync_resident
// the store is bitwise as without residency, in fused and split passes alike.
#include <cmath>
#include <random>
#include <vector>

#include "catch.h"
#include "optim/adamw.h"
#include "optim/optimizer.h"
#include "optim/resident_regions.h"
#include "store/host_store.h"

namespace {

mt::ParamLayout three_regions() {
  mt::ParamLayout l;
  mt::Region a{mt::RegionKind::embedding, -1, {}, 300, {}};
  a.params.push_back({"w", {10, 20}, 0, 200, true, mt::InitKind::normal, {}, {}});
  a.params.push_back({"b", {100}, 200, 100, false, mt::InitKind::zeros, {}, {}});
  mt::Region b{mt::RegionKind::decoder_layer, 0, {}, 5000, {}};
  b.params.push_back({"big", {5000}, 0, 5000, true, mt::InitKind::normal, {}, {}});
  mt::Region c{mt::RegionKind::head, -1, {}, 700, {}};
  c.params.push_back({"norm", {700}, 0, 700, false, mt::InitKind::ones, {}, {}});
  l.regions = {a, b, c};
  l.total_numel = 6000;
  l.largest_region_numel = 5000;
  return l;
}

// The device's part, on the host: its own p, m, v and gradient of each resident region, updated by the same AdamW
// element operations, and copied into the store by write_back().
class HostResident final : public mt::ResidentRegions {
 public:
  HostResident(mt::HostStore& store, int64_t count) : store_(store) {
    for (int64_t r = 0; r < count; ++r) {
      const int64_t n = store.numel(r);
      p_.emplace_back(store.master(r), store.master(r) + n);
      m_.emplace_back(store.exp_avg(r), store.exp_avg(r) + n);
      v_.emplace_back(store.exp_avg_sq(r), store.exp_avg_sq(r) + n);
      g_.emplace_back(n, 0.0f);
    }
  }
  int64_t count() const override { return static_cast<int64_t>(p_.size()); }
  void update(int64_t r, const mt::AdamWStep& hp, bool skipped, int64_t version) override {
    const auto i = static_cast<size_t>(r);
    updates.push_back({r, version, skipped});
    if (skipped) return;
    for (const mt::ParamSlot& slot : store_.layout().regions[i].params)
      mt::adamw_update(p_[i].data() + slot.offset, m_[i].data() + slot.offset, v_[i].data() + slot.offset,
                       g_[i].data() + slot.offset, slot.numel, hp, slot.weight_decay, nullptr);
    pending_.push_back(r);
  }
  void write_back() override {
    for (const int64_t r : pending_) {
      const auto i = static_cast<size_t>(r);
      std::copy(p_[i].begin(), p_[i].end(), store_.master(r));
      std::copy(m_[i].begin(), m_[i].end(), store_.exp_avg(r));
      std::copy(v_[i].begin(), v_[i].end(), store_.exp_avg_sq(r));
      store_.refresh_stream_copy(r);
    }
    pending_.clear();
  }
  // The engine's part: the step's gradient lands here, not in the store.
  void set_gradient(int64_t r, const float* g) { std::copy(g, g + store_.numel(r), g_[static_cast<size_t>(r)].begin()); }
  struct Call {
    int64_t region, version;
    bool skipped;
  };
  std::vector<Call> updates;

 private:
  mt::HostStore& store_;
  std::vector<std::vector<float>> p_, m_, v_, g_;
  std::vector<int64_t> pending_;  // updated since the last write_back
};

struct Result {
  std::vector<std::vector<float>> p, m, v;
  std::vector<std::vector<std::uint16_t>> copy;
};

// Three steps on the same gradients per step (the third non-finite: skipped), resident regions [0, count).
Result run(int64_t count, mt::UpdatePasses passes, std::vector<HostResident::Call>* calls = nullptr) {
  mt::HostStore store(three_regions(), mt::DType::bf16);
  std::mt19937 rng(9);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (int64_t r = 0; r < store.num_regions(); ++r) {
    for (int64_t i = 0; i < store.numel(r); ++i) store.master(r)[i] = d(rng);
    store.refresh_stream_copy(r);
  }
  HostResident resident(store, count);
  if (count > 0) store.set_resident(&resident);
  mt::OptimizerSettings s;
  s.weight_decay = 0.1;
  s.max_grad_norm = 1.0;
  s.passes = passes;
  mt::Optimizer opt(store, s);
  const std::vector<float> initial(store.master(0), store.master(0) + store.numel(0));
  for (int step = 1; step <= 3; ++step) {
    double ss = 0;
    for (int64_t r = 0; r < store.num_regions(); ++r) {
      for (int64_t i = 0; i < store.numel(r); ++i) {
        store.grad(r)[i] = 0.05f * d(rng);
        ss += double(store.grad(r)[i]) * store.grad(r)[i];
      }
      if (r < count) resident.set_gradient(r, store.grad(r));
    }
    if (step == 3) ss = std::nan("");
    const mt::OptimizerReport report = opt.step(1e-2, {}, ss);
    CHECK(report.skipped == (step == 3));
    for (int64_t r = 0; r < store.num_regions(); ++r) store.wait_region(r, step);  // every region published
  }
  if (count > 0) CHECK(std::equal(initial.begin(), initial.end(), store.master(0)));  // the device's copy is the truth
  store.sync_resident();
  store.set_resident(nullptr);
  if (calls) *calls = resident.updates;
  Result out;
  for (int64_t r = 0; r < store.num_regions(); ++r) {
    const int64_t n = store.numel(r);
    out.p.emplace_back(store.master(r), store.master(r) + n);
    out.m.emplace_back(store.exp_avg(r), store.exp_avg(r) + n);
    out.v.emplace_back(store.exp_avg_sq(r), store.exp_avg_sq(r) + n);
    out.copy.emplace_back(store.stream_bf16(r), store.stream_bf16(r) + n);
  }
  return out;
}

}  // namespace

TEST_CASE("the optimizer hands the leading regions to their device once a step and the store ends bitwise the same",
          "[optimizer][resident]") {
  for (const mt::UpdatePasses passes : {mt::UpdatePasses::fused, mt::UpdatePasses::split}) {
    const Result none = run(0, passes);
    for (const int64_t count : {1, 2, 3}) {
      INFO("resident regions " << count << " split " << (passes == mt::UpdatePasses::split));
      std::vector<HostResident::Call> calls;
      const Result some = run(count, passes, &calls);
      CHECK(some.p == none.p);
      CHECK(some.m == none.m);
      CHECK(some.v == none.v);
      CHECK(some.copy == none.copy);
      REQUIRE(calls.size() == static_cast<size_t>(3 * count));  // each resident region once a step, in order
      for (size_t k = 0; k < calls.size(); ++k) {
        CHECK(calls[k].region == static_cast<int64_t>(k) % count);
        CHECK(calls[k].version == static_cast<int64_t>(k) / count + 1);
        CHECK(calls[k].skipped == (calls[k].version == 3));
      }
    }
  }
}

TEST_CASE("the optimizer refuses a host norm pass over GPU-resident regions' gradients", "[optimizer][resident]") {
  mt::HostStore store(three_regions(), mt::DType::bf16);
  HostResident resident(store, 1);
  store.set_resident(&resident);
  mt::Optimizer opt(store, mt::OptimizerSettings{});
  CHECK_THROWS_WITH(opt.step(1e-2), mt_test::contains("must be given"));
  store.set_resident(nullptr);
}
