// Golden tests of the multi-head latent attention families (tools/make_mla_fixtures.py wrote the references):
// `train` in fp32 reproduces PyTorch's per-step loss, gradient norm and learning rate and every final parameter
// (DeepSeek-V3's low-rank query, interleaved rope, YaRN mscale, values narrower than the q/k heads, noaux_tc routing,
// sequences longer than an attention tile; GLM-4.7-Flash's attention biases, rotate_half rope, mlp_layer_types;
// DeepSeek-V2's q_proj and softmax greedy / group_limited_greedy routers × routed_scaling_factor), in
// micro-batches of one sequence and with saved internals too; bf16 stays near PyTorch's fp32 losses.
#include <cmath>

#include "catch.h"
#include "integration/fixture_run.h"

using namespace mt::testing;

TEST_CASE("deepseek_v3 fixture (MLA with a low-rank query, interleaved rope, YaRN mscale, v head dim 12 of q/k 16, "
          "noaux_tc router, shared expert, 150-token padded sequences) matches PyTorch", "[parity][mla]") {
  check_against_reference("deepseek_v3", "parity-deepseek_v3");
}
TEST_CASE("glm4_moe_lite fixture (MLA with attention biases, rotate_half rope, mlp_layer_types, two shared experts) "
          "matches PyTorch", "[parity][mla]") {
  check_against_reference("glm4_moe_lite", "parity-glm4_moe_lite");
}
TEST_CASE("deepseek_v2 fixture (MLA with q_proj, softmax group_limited_greedy router × routed_scaling_factor, two "
          "shared experts) matches PyTorch", "[parity][mla]") {
  check_against_reference("deepseek_v2", "parity-deepseek_v2");
}
TEST_CASE("deepseek_v2_lora fixture (MLA with a low-rank query, greedy softmax router, every layer sparse) matches "
          "PyTorch", "[parity][mla]") {
  check_against_reference("deepseek_v2_lora", "parity-deepseek_v2_lora");
}
TEST_CASE("MLA fixtures in micro-batches of one sequence and with saved internals still match PyTorch",
          "[parity][mla]") {
  check_against_reference("deepseek_v3", "parity-deepseek_v3-saved", {"training.recompute_layers=0"});
  check_against_reference("glm4_moe_lite", "parity-glm4_moe_lite-mb1", {"training.micro_batch_size=1"});
}
TEST_CASE("bfloat16 MLA training stays within 2e-2 of PyTorch's fp32 losses", "[parity][bf16][mla]") {
  for (const std::string name : {"deepseek_v3", "glm4_moe_lite", "deepseek_v2"}) check_bf16_losses(name);
}
