// train's preflight decisions (cli/train/preflight.h) on made-up machine limits: each shortfall is named, and a
// machine with room passes; a data-parallel run plans one GPU's share of the batch.
#include "catch.h"
#include "cli/train/preflight.h"
#include "model/model_spec.h"

namespace {

mt::ModelSpec qwen25_7b() { return mt::load_model_spec(MEGATRAIN_SOURCE_DIR "/configs/models/qwen2.5-7b.json"); }

mt::RunShape run() {
  mt::RunShape r;
  r.seq_len = 1024;
  r.batch_size = 8;
  r.checkpoint_interval = 4;
  return r;
}

constexpr int64_t GiB = int64_t{1} << 30;

mt::MachineLimits roomy() {
  mt::MachineLimits m;
  m.mem_available = 200 * GiB;
  m.shm_dir = "/dev/shm";
  m.shm_free = 200 * GiB;
  m.memlock = -1;
  m.gpu_bytes = 139 * GiB;
  return m;
}

}  // namespace

TEST_CASE("preflight: a machine with room passes", "[plan][preflight]") {
  CHECK(mt::preflight_shortfall(qwen25_7b(), run(), true, roomy()).empty());
}

TEST_CASE("preflight: each shortfall is named", "[plan][preflight]") {
  const mt::ModelSpec spec = qwen25_7b();
  mt::MachineLimits m = roomy();
  m.mem_available = 100 * GiB;
  CHECK_THAT(mt::preflight_shortfall(spec, run(), true, m),
             mt_test::contains("host RAM: the run needs 127.67 GiB (18 B/parameter × 7.616 B parameters) but only "
                               "100.00 GiB is available"));
  m = roomy();
  m.shm_free = 64 * GiB;
  CHECK_THAT(mt::preflight_shortfall(spec, run(), true, m), mt_test::contains("host store: /dev/shm has 64.00 GiB free"));
  m = roomy();
  m.memlock = 64 << 10;
  CHECK_THAT(mt::preflight_shortfall(spec, run(), true, m), mt_test::contains("locked memory: the CUDA backend page-locks"));
  CHECK(mt::preflight_shortfall(spec, run(), false, m).empty());  // the CPU backend locks nothing
  m = roomy();
  m.gpu_bytes = 8 * GiB;
  CHECK_THAT(mt::preflight_shortfall(spec, run(), true, m), mt_test::contains("GPU memory: the plan needs"));
}

TEST_CASE("preflight refuses a store whose slices do not fit a NUMA domain", "[plan][preflight]") {
  const mt::ModelSpec spec = qwen25_7b();
  mt::MachineLimits m = roomy();
  m.numa_os_index = {0, 1};
  m.numa_cores = {8, 8};
  m.numa_free = {int64_t{1} << 40, int64_t{1} << 40};
  mt::RunShape two = run();
  two.ranks = 2;
  CHECK(mt::preflight_shortfall(spec, two, true, m).empty());
  m.numa_free[1] = int64_t{40} << 30;  // 7.6 B parameters × 18 B / 2 ranks ≈ 64 GiB per domain
  CHECK_THAT(mt::preflight_shortfall(spec, two, true, m), mt_test::contains("host RAM of NUMA domain 1"));
  two.ranks = 1;  // one rank binds to both domains and may allocate from either: only the total counts
  CHECK(mt::preflight_shortfall(spec, two, true, m).empty());
}

TEST_CASE("preflight plans one GPU's share of a data-parallel batch", "[plan][preflight]") {
  const mt::Config c = mt::load_config(MEGATRAIN_SOURCE_DIR "/configs/demo.yaml", {"training.batch_size=10"});
  CHECK(mt::run_shape(c, 1).batch_size == 10);
  CHECK(mt::run_shape(c, 1, 4).batch_size == 3);  // token-balanced shares of about 10 / 4, rounded up
  CHECK(mt::run_shape(c, 2, 10).batch_size == 1);
}
