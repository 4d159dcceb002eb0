// CPU backend memory and elementwise ops: aligned allocation, zero/copy/add/scale, and sum_squares (exact in fp64
// terms, bitwise independent of the thread count).
#include <omp.h>

#include <cstdint>

#include "backend/backend.h"
#include "backend/grad_check.h"
#include "catch.h"

using mt::test::approx_equal;
using mt::test::random_floats;

TEST_CASE("alloc_reals is 64-byte aligned and zero_bytes, copy_bytes and add work", "[backend][elementwise]") {
  auto be = mt::make_cpu_backend();
  const int64_t n = 100003;  // above the parallel threshold, not a multiple of anything
  float* a = be->alloc_reals(n);
  float* b = be->alloc_reals(n);
  float* empty = be->alloc_reals(0);
  CHECK(reinterpret_cast<uintptr_t>(a) % 64 == 0);
  CHECK(reinterpret_cast<uintptr_t>(b) % 64 == 0);
  CHECK(empty != nullptr);
  const auto x = random_floats(n, 1), y = random_floats(n, 2);
  be->copy_bytes(a, x.data(), n * 4);
  be->copy_bytes(b, y.data(), n * 4);
  be->add(a, b, n);
  for (int64_t i = 0; i < n; i += 997) CHECK(a[i] == x[i] + y[i]);
  CHECK(a[n - 1] == x[n - 1] + y[n - 1]);
  be->zero_bytes(b, n * 4);
  CHECK(be->sum_squares(b, n) == 0.0);
  be->free_bytes(a);
  be->free_bytes(b);
  be->free_bytes(empty);
}

TEST_CASE("sum_squares is fp64-accurate and independent of the thread count", "[backend][elementwise]") {
  auto be = mt::make_cpu_backend();
  const int64_t n = 123457;
  const auto x = random_floats(n, 3, 10.f);
  long double want = 0;
  for (float v : x) want += static_cast<long double>(v) * v;
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const double one = be->sum_squares(x.data(), n);
  omp_set_num_threads(2);
  const double two = be->sum_squares(x.data(), n);
  omp_set_num_threads(threads);
  CHECK(approx_equal(one, static_cast<double>(want), 1e-12));
  CHECK(one == two);
}

TEST_CASE("scale multiplies in place by alpha", "[backend][elementwise]") {
  auto be = mt::make_cpu_backend();
  for (const int64_t n : {int64_t{37}, int64_t{100003}}) {  // below and above the parallel threshold
    const auto x = random_floats(n, 4);
    auto y = x;
    be->scale(y.data(), 0.3f, n);
    for (int64_t i = 0; i < n; ++i) {
      if (y[i] != x[i] * 0.3f) FAIL("element " << i);
    }
    be->scale(y.data(), 0.f, n);
    CHECK(be->sum_squares(y.data(), n) == 0.0);
  }
}
