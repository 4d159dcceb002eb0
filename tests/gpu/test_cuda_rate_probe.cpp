// The CUDA backend's rate probe (kernels/runtime/rate_probe.h, Backend::measure_rates): finite, positive rates within
// what a PCIe Gen4/Gen5 host and a data-centre GPU can do (a bf16 GEMM above 50 TFLOP/s, copies of 5 to 80 GB/s each
// way), in well under a second, leaving the backend's memory as it was; the device is named.
#include <chrono>
#include <cmath>

#include "catch.h"
#include "core/runtime_switches.h"
#include "gpu/gpu_test_util.h"
#include "kernels/runtime/cuda_backend.h"

TEST_CASE("cuda: the rate probe measures the GEMM and page-locked copies in well under a second", "[cuda][rates]") {
  MT_REQUIRE_GPU();
  const std::unique_ptr<mt::Backend> be = mt::make_cuda_backend(mt::DType::bf16, 0, mt::environment_switches());
  CHECK_FALSE(be->device_name().empty());
  CHECK(be->device_name() != "cuda");
  const int64_t peak = be->peak_memory_bytes();
  const auto start = std::chrono::steady_clock::now();
  const std::optional<mt::DeviceRates> r = be->measure_rates();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(r);
  INFO("GEMM " << r->gemm_flops / 1e12 << " TFLOP/s, H2D " << r->h2d_bytes / 1e9 << " GB/s, D2H "
               << r->d2h_bytes / 1e9 << " GB/s in " << seconds << " s");
  CHECK(std::isfinite(r->gemm_flops));
  CHECK(r->gemm_flops > 50e12);
  CHECK(r->h2d_bytes > 5e9);
  CHECK(r->h2d_bytes < 80e9);
  CHECK(r->d2h_bytes > 5e9);
  CHECK(r->d2h_bytes < 80e9);
  CHECK(seconds < 1.0);
  CHECK(be->peak_memory_bytes() == peak);  // the probe's buffers are its own
}
