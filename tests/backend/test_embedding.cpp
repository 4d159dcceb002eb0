// CPU backend embedding: forward gathers rows; backward scatter-adds with repeated ids.
#include "backend/backend.h"
#include "backend/grad_check.h"
#include "catch.h"

using mt::test::approx_equal;
using mt::test::random_floats;

TEST_CASE("embedding forward gathers rows and backward scatter-adds repeated ids", "[backend][embedding]") {
  auto be = mt::make_cpu_backend();
  const int64_t V = 5, H = 300, T = 7;  // H spans more than one column block
  const std::vector<int32_t> ids = {3, 0, 3, 4, 3, 0, 1};
  auto table = random_floats(V * H, 1), dy = random_floats(T * H, 2);
  std::vector<float> y(T * H);
  be->embedding_forward(y.data(), table.data(), ids.data(), T, H);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) CHECK(y[t * H + h] == table[ids[t] * H + h]);
  }
  std::vector<float> dtable(V * H, 0.5f);
  be->embedding_backward(dtable.data(), dy.data(), ids.data(), T, H);
  for (int64_t v = 0; v < V; ++v) {
    for (int64_t h = 0; h < H; ++h) {
      double want = 0.5;
      for (int64_t t = 0; t < T; ++t) want += ids[t] == v ? dy[t * H + h] : 0.f;
      CHECK(approx_equal(dtable[v * H + h], want, 1e-5));
    }
  }
}
