// calc-resource's advice (plan/resource_advice.h): verdicts, the largest model for the RAM, the chosen interval.
#include "catch.h"
#include "model/model_spec.h"
#include "plan/resource_advice.h"

namespace {

mt::ModelSpec load(const char* name) {
  return mt::load_model_spec(std::string(MEGATRAIN_SOURCE_DIR "/configs/models/") + name + ".json");
}
constexpr int64_t GiB = int64_t{1} << 30;

}  // namespace

TEST_CASE("advice: Qwen2.5-7B fits an H200 with 256 GiB", "[plan][advice]") {
  mt::RunShape run;
  run.checkpoint_interval = 0;  // choose
  const mt::ResourceAdvice a = mt::advise(load("qwen2.5-7b"), run, {139 * GiB, 256 * GiB});
  CHECK(a.fits());
  CHECK(a.shortfall.empty());
  CHECK(a.recommended_interval == 1);
  CHECK(a.largest_micro_batch == 8);
  CHECK(a.largest_parameters == static_cast<int64_t>(256 * GiB * mt::kHostUsableShare) / 18);
}

TEST_CASE("advice: too little RAM or GPU memory is named", "[plan][advice]") {
  mt::RunShape run;
  const mt::ResourceAdvice ram = mt::advise(load("qwen2.5-7b"), run, {139 * GiB, 64 * GiB});
  CHECK_FALSE(ram.host_fits);
  CHECK_THAT(ram.shortfall, mt_test::contains("host RAM: the store needs 127.67 GiB"));
  const mt::ResourceAdvice gpu = mt::advise(load("llama-3.1-70b"), run, {1 * GiB, 4096 * GiB});
  CHECK_FALSE(gpu.gpu_fits);
  CHECK(gpu.recommended_interval == 0);
  CHECK_THAT(gpu.shortfall, mt_test::contains("even micro-batch 1"));
  run.checkpoint_interval = 1;
  run.micro_batch_size = 8;
  run.seq_len = 4096;  // micro-batch 8 needs about 28 GiB, micro-batch 1 about 21 GiB
  const mt::ResourceAdvice tight = mt::advise(load("llama-3.1-8b"), run, {24 * GiB, 512 * GiB});
  CHECK_FALSE(tight.gpu_fits);
  CHECK(tight.largest_micro_batch >= 1);
  CHECK_THAT(tight.shortfall, mt_test::contains("use checkpoint_interval"));
}
