// The CUDA backend's rmsnorm_forward_fp32_product (OLMo 2/3's RMSNorm: the weight product in fp32, rounded once)
// against the CPU reference, fp32 and bf16, over rows as wide as a whole q projection (OLMo-2-32B's 5120) and as
// narrow as a kv head group; in bf16 every element is the CPU reference's fp32 value rounded once (within one bf16
// step of it, where rmsnorm_forward's x̂-first rounding is not).
#include <cmath>

#include "backend/backend.h"
#include "kernels/runtime/cuda_backend.h"
#include "gpu/gpu_test_util.h"

using namespace mt::test;
using mt::DType;

TEST_CASE("rmsnorm_forward_fp32_product rounds the fp32 weight product once, as the CPU reference",
          "[gpu][backend][dense-families]") {
  MT_REQUIRE_GPU();
  for (const DType dt : {DType::f32, DType::bf16}) {
    auto be = mt::make_cuda_backend(dt, 0, mt::environment_switches());
    for (const auto& [N, D] : {std::pair<int64_t, int64_t>{37, 5120}, {65, 48}, {3, 16}}) {
      DYNAMIC_SECTION((dt == DType::f32 ? "float32" : "bfloat16") << " N " << N << " D " << D) {
        const auto x = rounded_to(dt, random_floats(N * D, 80));
        const auto w = rounded_to(dt, random_floats(D, 81));
        BackendBuffer d_x(*be, x, dt), d_w(*be, w, dt), y(*be, N * D, dt);
        be->rmsnorm_forward_fp32_product(y.get(), d_x.get(), d_w.get(), N, D, 1e-6f);
        std::vector<float> y_ref(static_cast<size_t>(N * D));
        cpu().rmsnorm_forward_fp32_product(y_ref.data(), x.data(), w.data(), N, D, 1e-6f);
        check_close("rmsnorm_forward_fp32_product y", y.read(), y_ref, tolerance_of(dt));
        if (dt == DType::bf16) {
          const std::vector<float> got = y.read();
          double worst = 0;  // in bf16 steps of the reference
          for (size_t i = 0; i < got.size(); ++i)
            if (y_ref[i] != 0.f)
              worst = std::max(worst, std::abs(got[i] - y_ref[i]) / std::ldexp(1.0, std::ilogb(y_ref[i]) - 7));
          CHECK(worst <= 1.0);
        }
      }
    }
  }
}
