// Every block's backward against fp64 finite differences (fd_check.h) for every family's golden fixture model
// (tests/fixtures/<case>/model/config.json: attention with GQA, biases, q/k RMS and LayerNorms, sliding windows,
// soft-caps, sinks, ALiBi, output gates and partial / interleaved RoPE; multi-head latent attention; GLU and plain
// MLPs; MoE with shared experts and clamped SwiGLU; Gated DeltaNet; lightning attention; RMS norms with w and
// (1 + w), LayerNorms, sandwich norms, parallel residuals, MiniMax's scaled residuals from the norms): its embedding, every decoder layer and its head on a padded batch, and the
// decoder layers of one fixture per kind of token mixer on packed sequences. MoE layers route to every expert and
// GPT-OSS's clamp is out of reach here (smooth()): finite differences across a choice or a corner measure a jump.
#include <filesystem>
#include <string>

#include "grad64/fd_check.h"

using namespace mt;
using namespace mt::testing;
using namespace mt::testing::grad64;

namespace {

std::filesystem::path fixture_config(const std::string& name) {
  return std::filesystem::path(MEGATRAIN_SOURCE_DIR) / "tests" / "fixtures" / name / "model" / "config.json";
}

// The fixture's model spec made smooth where it has kinks: every expert routed to (top-k = all experts, every group
// kept) and GPT-OSS's SwiGLU clamp out of reach (limit 1e4, same formula). A top-k choice is piecewise constant and
// a clamp has a corner: a finite difference across either measures the jump, not the derivative. (The clamp's
// backward is checked in tests/backend/test_gpt_oss_ops.cpp, the top-k's in test_moe.cpp.)
ModelSpec smooth(ModelSpec spec) {
  for (LayerSpec& l : spec.layers) {
    l.moe.top_k = l.moe.num_experts;
    l.moe.topk_groups = l.moe.groups;
    if (l.moe.clamped_swiglu()) l.moe.swiglu_limit = 1e4;
  }
  return spec;
}

// The fixture's spec, smooth.
ModelSpec fixture_spec(const std::string& name) { return smooth(load_model_spec(fixture_config(name), true)); }

void check_model(const std::string& name) {
  const OneThread one;
  LayerHarness h(fixture_spec(name));
  check_embedding(name, h);
  check_layers(name, h);
  check_head(name, h);
}

}  // namespace

// Every dense family's fixture: GQA and MQA, biases, q/k norms (per head and whole-projection), sliding windows,
// soft-caps, sandwich and post-block norms, GeGLU, fused projections, partial and interleaved rotary, ALiBi, NoPE
// layers, residual multipliers, embedding and logit scales, tied and normalised (NormHead) LM heads, final soft-caps.
TEST_CASE("every block's backward matches fp64 finite differences: dense families", "[grad64][dense]") {
  for (const std::string name : {"llama", "qwen2", "qwen3", "mistral", "gemma2", "gemma3", "phi3", "glm4", "internlm2",
                                 "baichuan2_7b", "baichuan2_13b", "seed_oss", "ernie4_5", "smollm3", "granite",
                                 "hunyuan_dense", "olmo2", "olmo3", "exaone4"})
    check_model(name);
}

// LayerNorm with and without bias, per-head q/k LayerNorms, parallel residuals and the non-gated MLP.
TEST_CASE("every block's backward matches fp64 finite differences: LayerNorm families", "[grad64][layernorm]") {
  for (const std::string name : {"cohere", "cohere2", "starcoder2"}) check_model(name);
}

// Softmax-routed experts with and without a gated shared expert, sigmoid group routing, biased SwiGLU experts with
// attention sinks, Llama 4's input-scaled experts, NoPE layers and chunked attention; Gated DeltaNet with gated
// attention, both fused layouts, dense and MoE; multi-head latent attention with and without a q LoRA, dense and MoE;
// MiniMax's lightning attention between softmax layers with residuals from the norms (α, β apart from 1).
TEST_CASE("every block's backward matches fp64 finite differences: MoE, hybrid and MLA families", "[grad64][moe]") {
  for (const std::string name : {"mixtral", "qwen2_moe", "qwen3_moe", "gpt_oss", "glm4_moe", "llama4", "qwen3_5",
                                 "qwen3_next", "qwen3_5_moe", "qwen3_next_moe", "deepseek_v2", "deepseek_v3",
                                 "glm4_moe_lite", "minimax"})
    check_model(name);
}

// Packed examples (tiny_batch's: positions restart, segments separate them) through every kind of token mixer:
// attention's segment masks (plain, windowed and soft-capped, with sinks, chunked, latent), the delta rule's and the
// causal convolution's restarts (Gated DeltaNet, dense and MoE), lightning attention's restarts (MiniMax).
TEST_CASE("every decoder layer's backward matches fp64 finite differences on packed sequences", "[grad64][packed]") {
  const OneThread one;
  for (const std::string name :
       {"llama", "gemma2", "gpt_oss", "llama4", "deepseek_v3", "qwen3_5", "qwen3_next_moe", "minimax"}) {
    LayerHarness h(fixture_spec(name), true);
    check_layers(name + " packed", h);
  }
}
