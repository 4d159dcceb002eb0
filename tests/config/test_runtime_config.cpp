// Tests of the config's `runtime:` section: every key read and written back, the defaults, bad values.
// Invariant: all YAML is inline text; nothing else is read.
#include <cstdlib>
#include <string>

#include "catch.h"
#include "config/config.h"
#include "core/error.h"
#include "core/runtime_switches.h"

namespace {

const std::string kMinimal = "model:\n  name: tiny-llama\ndataset:\n  name: alpaca_en\n";

std::string config_error(const std::string& runtime_lines) {
  try {
    mt::parse_config(kMinimal + "runtime:\n" + runtime_lines, "cfg.yaml");
  } catch (const mt::Error& e) {
    return e.what();
  }
  return "";
}

bool contains_line(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

}  // namespace

TEST_CASE("runtime config: the defaults", "[runtime_config]") {
  CHECK(mt::parse_config(kMinimal, "cfg.yaml").runtime == mt::RuntimeSwitches{});  // each default, as the struct has it
  const std::string yaml = mt::parse_config(kMinimal, "cfg.yaml").yaml_text;
  CHECK(yaml.find("runtime:\n  attention: auto\n  cudnn_seq_buckets: true\n") != std::string::npos);
  CHECK(yaml.find("  cudnn_workspace_mib: auto\n") != std::string::npos);
}

TEST_CASE("runtime config: every key read from the config and written back", "[runtime_config]") {
  const std::string runtime =
      "runtime:\n  attention: ours\n  cudnn_seq_buckets: false\n  cudnn_ragged: false\n"
      "  attention_deterministic: false\n  cudnn_backward_tile: 512\n  cudnn_workspace_mib: 2048\n"
      "  moe_gemm: grouped\n  moe_gemm_streams: 2\n  delta_rule: recurrent\n"
      "  profile_ops: true\n  tier_io: threads\n  step_rates: constants\n";
  const mt::Config c = mt::parse_config(kMinimal + runtime, "cfg.yaml");
  const mt::RuntimeSwitches& s = c.runtime;
  CHECK(s.attention == mt::AttentionChoice::ours);
  CHECK_FALSE(s.cudnn_seq_buckets);
  CHECK_FALSE(s.cudnn_ragged);
  CHECK_FALSE(s.attention_deterministic);
  CHECK(s.cudnn_backward_tile == 512);
  CHECK(s.cudnn_workspace_mib == 2048);
  CHECK(s.moe_gemm == mt::MoeGemmChoice::grouped);
  CHECK(s.moe_gemm_streams == 2);
  CHECK(s.delta_rule == mt::DeltaRuleChoice::recurrent);
  CHECK(s.profile_ops);
  CHECK(s.tier_io == mt::TierIoChoice::threads);
  CHECK(s.step_rates == mt::StepRatesChoice::constants);  // not the default (cached)
  const mt::Config back = mt::parse_config(c.yaml_text, "back.yaml");
  CHECK(back.yaml_text == c.yaml_text);
  CHECK(mt::parse_config(kMinimal, "cfg.yaml", {"runtime.cudnn_backward_tile=0"}).runtime.cudnn_backward_tile == 0);
}

TEST_CASE("runtime config: a bad value is one line naming the key and the value", "[runtime_config]") {
  CHECK(config_error("  attention: flash\n") ==
        "cfg.yaml: runtime.attention: 'flash' is not one of ours, cudnn, auto");
  CHECK(config_error("  cudnn_backward_tile: 100\n") ==
        "cfg.yaml: runtime.cudnn_backward_tile: 100 is not 0 or a power of two of at least 128");
  CHECK(config_error("  moe_gemm_streams: 5\n") == "cfg.yaml: runtime.moe_gemm_streams: 5 is not 1 to 4");
  CHECK(config_error("  moe_gemm_streams: 0\n") == "cfg.yaml: runtime.moe_gemm_streams: '0' is not an integer >= 1");
  CHECK(config_error("  tier_io: aio\n") == "cfg.yaml: runtime.tier_io: 'aio' is not one of auto, threads");
  CHECK(config_error("  moe_gemm: fused\n") ==
        "cfg.yaml: runtime.moe_gemm: 'fused' is not one of loop, grouped, cutlass");
}

// cudnn_graphs (builder or frontend) is gone: cudnn-frontend builds every cuDNN attention graph. A config that still
// sets it is refused as any unknown key is.
TEST_CASE("runtime config: the removed cudnn_graphs is an unknown key", "[runtime_config]") {
  const std::string why = config_error("  cudnn_graphs: frontend\n");
  CHECK(why.rfind("cfg.yaml: unknown key 'runtime.cudnn_graphs' (accepted: attention, ", 0) == 0);
  CHECK(why.find('\n') == std::string::npos);
}

TEST_CASE("runtime config: moe_gemm cutlass read and written back", "[runtime_config]") {
  const mt::Config c = mt::parse_config(kMinimal + "runtime:\n  moe_gemm: cutlass\n", "cfg.yaml");
  CHECK(c.runtime.moe_gemm == mt::MoeGemmChoice::cutlass);
  CHECK(contains_line(c.yaml_text, "  moe_gemm: cutlass"));
  CHECK(mt::parse_config(c.yaml_text, "back.yaml").runtime.moe_gemm == mt::MoeGemmChoice::cutlass);
}

TEST_CASE("runtime config: the environment's variables go over the file's section, once, when it loads",
          "[runtime_config]") {
  struct Env {
    const char* name;
    Env(const char* n, const char* value) : name(n) { setenv(n, value, 1); }
    ~Env() { unsetenv(name); }
  };
  const std::string yaml = kMinimal + "runtime:\n  attention: cudnn\n  moe_gemm: grouped\n";
  mt::Config c;
  {
    const Env attention("MEGATRAIN_ATTENTION", "ours"), tile("MEGATRAIN_CUDNN_BACKWARD_TILE", "0");
    c = mt::parse_config(yaml, "cfg.yaml");
    CHECK(contains_line(c.yaml_text, "  attention: ours"));
  }
  CHECK(c.runtime.attention == mt::AttentionChoice::ours);    // the variable over the file
  CHECK(c.runtime.moe_gemm == mt::MoeGemmChoice::grouped);    // the file where no variable is set
  CHECK(c.runtime.cudnn_backward_tile == 0);                  // the variable over the default
  CHECK(mt::parse_config(yaml, "cfg.yaml").runtime.attention == mt::AttentionChoice::cudnn);  // unset again
  const Env bad("MEGATRAIN_MOE_GEMM", "fused");
  CHECK_THROWS_WITH(mt::parse_config(yaml, "cfg.yaml"), "MEGATRAIN_MOE_GEMM must be loop, grouped or cutlass, not 'fused'");
}

TEST_CASE("runtime config: the backend is the environment's alone", "[runtime_config]") {
  CHECK(config_error("  backend: cpu\n").find("runtime.backend") != std::string::npos);
}
