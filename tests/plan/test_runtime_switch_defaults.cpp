// The runtime switches' defaults are the plan's constants (core cannot include plan/).
#include "catch.h"
#include "core/runtime_switches.h"
#include "plan/cudnn_attention_plan.h"
#include "plan/gemm_workspace.h"

TEST_CASE("runtime switches: defaults equal the plan's constants", "[runtime_switches]") {
  CHECK(mt::RuntimeSwitches{}.cudnn_backward_tile == mt::kCudnnBackwardTile);
  CHECK(mt::RuntimeSwitches{}.moe_gemm_streams == mt::kExpertGemmStreams);
}
