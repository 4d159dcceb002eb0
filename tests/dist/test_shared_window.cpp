// MPI-3 shared windows and the shared counters, in a one-rank job (the MPI tests cover several ranks).
#include <cstdint>
#include <cstring>
#include <thread>

#include "catch.h"
#include "dist/context.h"
#include "dist/shared_flags.h"
#include "dist/shared_window.h"

TEST_CASE("a shared window is page-aligned and holds every contribution", "[window]") {
  const mt::dist::Context& ctx = mt::dist::context();
  CHECK(ctx.node_size == ctx.size);
  mt::dist::SharedWindow w(ctx, 100000);
  CHECK(w.bytes() == 100000);
  CHECK(reinterpret_cast<std::uintptr_t>(w.base()) % mt::dist::page_size() == 0);
  std::memset(w.base(), 0xab, w.bytes());  // every byte is ours to write
  CHECK(w.base()[w.bytes() - 1] == std::byte{0xab});
}

TEST_CASE("a counter published with release is seen with the data before it", "[window]") {
  mt::dist::SharedWindow w(mt::dist::context(), 4096);
  auto* counter = reinterpret_cast<int64_t*>(w.base());
  auto* data = counter + 8;
  *counter = 0;
  std::thread writer([&] {
    for (int64_t v = 1; v <= 1000; ++v) {
      data[0] = v * 3;
      mt::dist::store_release(*counter, v);
    }
  });
  for (int64_t v = 1; v <= 1000; v += 37) {
    mt::dist::wait_until([&] { return mt::dist::load_acquire(*counter) >= v; });
    CHECK(data[0] >= v * 3);
  }
  writer.join();
}
