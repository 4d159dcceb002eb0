// The state tier without MPI: its file layout (units aligned for O_DIRECT, striped over the paths, padded parts),
// both I/O engines (io_uring where built, the thread pool) writing and reading back, a failure naming the file,
// and a StateTier's slices round trip, zeros before any write, and its files gone with it.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <memory>
#include <numeric>
#include <vector>

#include "catch.h"
#include "core/error.h"
#include "model/param_layout.h"
#include "store/host_store.h"
#include "store/state_tier.h"
#include "store/tier_io.h"
#include "store/tier_layout.h"

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

struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    char name[] = "/tmp/mt_tier_XXXXXX";
    path = mkdtemp(name);
  }
  ~ScratchDir() { std::filesystem::remove_all(path); }
};

}  // namespace

TEST_CASE("tier layout: aligned units striped over the paths, every kind padded", "[store][tier]") {
  const mt::ParamLayout layout = layout_of({5000, mt::TierLayout::kUnitElements + 10, 4096});
  const mt::TierSettings s{mt::OffloadMode::optimizer_master, {"/a", "/b"}, "t"};
  for (int rank : {0, 1}) {
    const mt::TierLayout t = mt::make_tier_layout(layout, s, rank, 2);
    REQUIRE(t.files.size() == 2);
    CHECK(t.files[static_cast<size_t>(0)] == std::filesystem::path(fmt::format("/a/megatrain-tier-t-rank{}.bin", rank)));
    int64_t elements = 0;
    for (size_t u = 0; u < t.units.size(); ++u) {
      const mt::TierUnit& unit = t.units[u];
      CHECK(unit.file == static_cast<int>(u % 2));
      CHECK(unit.offset % 16384 == 0);
      CHECK(unit.bytes == 3 * unit.kind_stride * 4);
      CHECK(unit.kind_stride % mt::HostStore::kSliceAlign == 0);
      CHECK(unit.kind_stride >= unit.end - unit.begin);
      CHECK(unit.end - unit.begin <= mt::TierLayout::kUnitElements);
      elements += unit.end - unit.begin;
    }
    int64_t own = 0;
    for (const mt::Region& r : layout.regions) own += mt::HostStore::slice_of(r.numel, rank, 2).size();
    CHECK(elements == own);
    CHECK(t.total_bytes() == std::accumulate(t.units.begin(), t.units.end(), int64_t{0},
                                             [](int64_t a, const mt::TierUnit& u) { return a + u.bytes; }));
  }
  CHECK(mt::make_tier_layout(layout, {mt::OffloadMode::optimizer, {"/a"}, "t"}, 0, 1).units[0].bytes ==
        2 * 8192 * 4);
}

TEST_CASE("tier I/O: both engines write and read back; a short read names the file", "[store][tier]") {
  ScratchDir dir;
  const std::string file = (dir.path / "f.bin").string();
  for (const mt::TierIoChoice engine : {mt::TierIoChoice::automatic, mt::TierIoChoice::threads}) {
    std::unique_ptr<mt::TierIo> io = mt::TierIo::create(engine);
    INFO(io->name());
    if (engine == mt::TierIoChoice::threads) CHECK(std::string(io->name()) == "threads");
    const int fd = open(file.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    const int64_t n = 3 * mt::TierIo::kChunkBytes / 4 + 1024;  // several chunks and a partial one
    std::vector<float> out(static_cast<size_t>(n)), in(static_cast<size_t>(n), 0.0f);
    std::iota(out.begin(), out.end(), 1.0f);
    mt::TierBatch batch;
    io->submit({fd, out.data(), n * 4, 4096, true, &file}, batch);
    io->wait(batch);
    io->submit({fd, in.data(), n * 4, 4096, false, &file}, batch);
    io->wait(batch);
    CHECK(in == out);
    io->submit({fd, in.data(), 8192, n * 4 + 4096, false, &file}, batch);  // past the end
    try {
      io->wait(batch);
      FAIL("no error");
    } catch (const mt::Error& e) {
      CHECK_THAT(std::string(e.what()), mt_test::contains("unexpected end of file: read of"));  // the cause first
      CHECK_THAT(std::string(e.what()), mt_test::contains("of " + file + " failed"));
    }
    close(fd);
  }
}

TEST_CASE("state tier: zeros first, slices round trip for every rank's files, files removed", "[store][tier]") {
  ScratchDir dir;
  const mt::ParamLayout layout = layout_of({10000, 70000});
  const mt::TierSettings s{mt::OffloadMode::optimizer, {dir.path.string()}, "unit"};
  std::vector<std::filesystem::path> files;
  {
    mt::StateTier rank1(layout, s, 1, 2);  // rank 1's files exist before rank 0 reaches them
    mt::StateTier rank0(layout, s, 0, 2);
    CHECK(rank0.part_of(mt::StateKind::master) == -1);
    CHECK(rank0.part_of(mt::StateKind::exp_avg_sq) == 1);
    for (const auto& f : rank0.units().files) files.push_back(f);
    for (const auto& f : rank1.units().files) files.push_back(f);
    for (int q : {0, 1}) {
      const mt::HostStore::Slice sl = mt::HostStore::slice_of(70000, q, 2);
      std::vector<float> got(static_cast<size_t>(sl.size()), 1.0f), put(static_cast<size_t>(sl.size()));
      rank0.read_slice(q, 1, mt::StateKind::exp_avg, got.data());
      CHECK(got == std::vector<float>(got.size(), 0.0f));
      std::iota(put.begin(), put.end(), static_cast<float>(q * 100000));
      rank0.write_slice(q, 1, mt::StateKind::exp_avg_sq, put.data());
      (q == 1 ? rank1 : rank0).read_slice(q, 1, mt::StateKind::exp_avg_sq, got.data());
      CHECK(got == put);
    }
    for (const auto& f : files) CHECK(std::filesystem::exists(f));
  }
  for (const auto& f : files) CHECK(!std::filesystem::exists(f));
}
