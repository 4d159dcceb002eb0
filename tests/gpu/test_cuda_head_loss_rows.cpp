// The CUDA backend's head_loss_rows (preference training: each row's CE, each row's gradient weighted) against the
// CPU reference: per-row losses, dx and dw (+=) within tolerance per dtype, and the unweighted call's loss unchanged.
#include <random>

#include "backend/backend.h"
#include "kernels/runtime/cuda_backend.h"
#include "core/dtype.h"
#include "gpu/gpu_test_util.h"

namespace {

using namespace mt::test;
using mt::DType;

TEST_CASE("cuda head_loss_rows matches the CPU reference", "[gpu][backend][head_loss]") {
  MT_REQUIRE_GPU();
  struct Row {
    const char* name;
    int64_t T, H, V;
    float softcap;
  };
  const Row rows[] = {
      {"pairs of 48 tokens, V 1000", 192, 64, 1000, 0.f},
      {"two chunks (V 262144: 1024 rows per chunk)", 1030, 16, 262144, 0.f},
      {"soft-cap 5, odd V 1001", 37, 24, 1001, 5.f},
  };
  for (const Row& c : rows) {
    DYNAMIC_SECTION("head_loss_rows " << c.name) {
      const auto x0 = random_floats(c.T * c.H, 60, 0.5f), w0 = random_floats(c.V * c.H, 61, 0.5f);
      const auto dw0 = random_floats(c.V * c.H, 62, 1e-3f);
      std::mt19937 rng(63);
      std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(c.V - 1));
      std::vector<int32_t> targets(c.T);
      std::vector<float> weight(c.T);
      for (int64_t t = 0; t < c.T; ++t) {
        targets[t] = t % 5 == 0 ? -100 : pick(rng);
        weight[t] = static_cast<float>((t / 12) % 7 - 3) * 0.4f;  // a weight per 12-token "sequence", some zero
      }
      for (const DType dt : {DType::f32, DType::bf16}) {
        INFO(mt::dtype_name(dt));
        auto be = mt::make_cuda_backend(dt, 0, mt::environment_switches());
        const double tol = tolerance_of(dt);
        const auto x = rounded_to(dt, x0), w = rounded_to(dt, w0);
        BackendBuffer d_x(*be, x, dt), d_w(*be, w, dt), dx(*be, c.T * c.H, dt), dw(*be, dw0, DType::f32);
        BackendBuffer d_weight(*be, weight, DType::f32), d_rows(*be, c.T, DType::f32);
        auto* d_targets = static_cast<int32_t*>(be->alloc_bytes(c.T * 4));
        be->upload(d_targets, targets.data(), c.T * 4);
        const double loss = be->head_loss_rows(dx.get(), dw.floats(), d_x.get(), d_w.get(), d_targets,
                                               d_weight.floats(), d_rows.floats(), c.T, c.H, c.V, 0.5f, c.softcap);
        std::vector<float> dx_ref(c.T * c.H), dw_ref = dw0, rows_ref(c.T);
        const double loss_ref = cpu().head_loss_rows(dx_ref.data(), dw_ref.data(), x.data(), w.data(), targets.data(),
                                                     weight.data(), rows_ref.data(), c.T, c.H, c.V, 0.5f, c.softcap);
        CHECK(std::abs(loss - loss_ref) <= 1e-5 * std::abs(loss_ref));
        check_close("head_loss_rows row_loss", d_rows.read(), rows_ref, tol);
        check_close("head_loss_rows dx", dx.read(), dx_ref, tol);
        check_close("head_loss_rows dw (+=)", dw.read(), dw_ref, tol);
        be->free_bytes(d_targets);
      }
    }
  }
}

}  // namespace
