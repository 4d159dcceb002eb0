// HostStore: the slicing rule, the window layout (page-aligned, zeroed buffers), versions, and the
// shared-memory space check. One-rank job; the MPI tests cover several ranks.
#include <cstdint>
#include <fmt/format.h>

#include <thread>

#include "catch.h"
#include "model/param_layout.h"
#include "store/host_store.h"
#include "store/shared_memory_check.h"

using mt::HostStore;

namespace {

mt::ParamLayout layout_of(std::vector<int64_t> numels) {
  mt::ParamLayout l;
  for (size_t r = 0; r < numels.size(); ++r) {
    mt::Region region{mt::RegionKind::decoder_layer, static_cast<int64_t>(r), {}, numels[r], {}};
    region.params.push_back({fmt::format("t{}", r), {numels[r]}, 0, numels[r], true, mt::InitKind::normal, {}, {}});
    l.regions.push_back(region);
    l.total_numel += numels[r];
    l.largest_region_numel = std::max(l.largest_region_numel, numels[r]);
  }
  return l;
}

}  // namespace

TEST_CASE("slices cover a region contiguously, aligned to 4096 elements", "[store]") {
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{4095}, int64_t{4096}, int64_t{4097}, int64_t{12289},
                    int64_t{1000003}}) {
    for (int ranks = 1; ranks <= 5; ++ranks) {
      INFO("numel " << n << " ranks " << ranks);
      int64_t next = 0;
      for (int q = 0; q < ranks; ++q) {
        const HostStore::Slice s = HostStore::slice_of(n, q, ranks);
        CHECK(s.begin == next);
        CHECK(s.end >= s.begin);
        CHECK((s.begin % HostStore::kSliceAlign == 0 || s.begin == n));
        next = s.end;
      }
      CHECK(next == n);
    }
  }
  // Balanced within one alignment unit.
  CHECK(HostStore::slice_of(1 << 20, 1, 4).size() == (1 << 18));
}

TEST_CASE("every buffer is page-aligned and zeroed, and one rank holds every slice", "[store]") {
  HostStore store(layout_of({5000, 4096, 1}), mt::DType::bf16);
  CHECK(store.ranks() == 1);
  CHECK(store.rank_bytes(0) == store.total_bytes());
  CHECK(store.bytes_per_parameter() == 18);
  CHECK(store.allocations().size() == 15);
  for (const auto& a : store.allocations()) CHECK(reinterpret_cast<std::uintptr_t>(a.data) % 4096 == 0);
  for (int64_t r = 0; r < store.num_regions(); ++r) {
    CHECK(store.slice(r).size() == store.numel(r));
    for (int64_t i = 0; i < store.numel(r); ++i) {
      REQUIRE(store.master(r)[i] == 0.0f);
      REQUIRE(store.exp_avg_sq(r)[i] == 0.0f);
      REQUIRE(store.stream_bf16(r)[i] == 0);
    }
  }
  store.master(0)[4999] = 1.5f;
  store.refresh_stream_copy(0);
  CHECK(store.stream_bf16(0)[4999] == mt::f32_to_bf16(1.5f));
}

TEST_CASE("readers wait for the version they require", "[store]") {
  HostStore store(layout_of({100, 200}), mt::DType::f32);
  store.wait_region(1);  // version 0: ready from the start
  store.set_required_version(1);
  std::thread optimizer([&] { store.publish_slice(1, 1); });
  store.wait_region(1);
  optimizer.join();
  store.publish_slice(0, 1);
  store.wait_region(0);
  CHECK(store.required_version() == 1);
}

TEST_CASE("a shared-memory filesystem too small for the store is named with both sizes", "[store]") {
  CHECK(mt::shared_memory_shortage("/dev/shm", 1000, 1000, 2).empty());
  const std::string m = mt::shared_memory_shortage("/dev/shm", 3ull << 30, 64ull << 20, 2);
  CHECK_THAT(m, mt_test::contains("/dev/shm has 64.0 MiB free"));
  CHECK_THAT(m, mt_test::contains("needs 3.00 GiB"));
  CHECK_THAT(m, mt_test::contains("2 ranks"));
  CHECK(mt::format_bytes(512) == "512 B");
  CHECK(mt::format_bytes(1536) == "1.5 KiB");
}
