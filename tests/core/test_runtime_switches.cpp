// Tests of the runtime switches: the environment variables over the defaults, bad values, and README's table of them.
// Invariant: every variable a test sets is unset again before it ends (EnvVar); nothing else is read but README.md.
#include <cstdlib>
#include <fstream>
#include <string>

#include "catch.h"
#include "core/error.h"
#include "core/runtime_switches.h"

namespace {

// Sets one variable for the scope.
struct EnvVar {
  std::string name;
  EnvVar(std::string n, const char* value) : name(std::move(n)) { setenv(name.c_str(), value, 1); }
  ~EnvVar() { unsetenv(name.c_str()); }
};

std::string env_error(const char* variable, const char* value) {
  EnvVar v(variable, value);
  try {
    mt::with_environment({});
  } catch (const mt::Error& e) {
    return e.what();
  }
  return "";
}

// README's row of the runtime switch table for variable ("| `VARIABLE` | ..."), or "".
std::string readme_row(std::string_view variable) {
  std::ifstream in(std::string(MEGATRAIN_SOURCE_DIR) + "/README.md");
  const std::string start = "| `" + std::string(variable) + "` |";
  for (std::string line; std::getline(in, line);)
    if (line.rfind(start, 0) == 0) return line;
  return "";
}

template <typename E, size_t N>
void check_readme_values(std::string_view variable, const mt::SwitchName<E> (&names)[N]) {
  const std::string row = readme_row(variable);
  for (const mt::SwitchName<E>& n : names) {
    INFO(variable << " = " << n.name);
    CHECK(row.find("`" + std::string(n.name) + "`") != std::string::npos);
  }
}

}  // namespace

TEST_CASE("runtime switches: README's table has a row per variable with its key and every named value",
          "[runtime_switches]") {
  for (const mt::SwitchVariable& sv : mt::switch_variables()) {
    INFO(sv.variable);
    const std::string row = readme_row(sv.variable);
    REQUIRE_FALSE(row.empty());
    if (sv.key != "backend") CHECK(row.find("| `" + std::string(sv.key) + "` |") != std::string::npos);
  }
  check_readme_values("MEGATRAIN_ATTENTION", mt::kAttentionNames);
  check_readme_values("MEGATRAIN_MOE_GEMM", mt::kMoeGemmNames);
  check_readme_values("MEGATRAIN_DELTA_RULE", mt::kDeltaRuleNames);
  check_readme_values("MEGATRAIN_TIER_IO", mt::kTierIoNames);
  check_readme_values("MEGATRAIN_STEP_RATES", mt::kStepRatesNames);
  check_readme_values("MEGATRAIN_BACKEND", mt::kBackendNames);
}

TEST_CASE("runtime switches: the defaults", "[runtime_switches]") {
  for (const mt::SwitchVariable& sv : mt::switch_variables()) unsetenv(std::string(sv.variable).c_str());
  const mt::RuntimeSwitches s = mt::environment_switches();
  CHECK(s.attention == mt::AttentionChoice::automatic);
  CHECK(s.cudnn_seq_buckets);
  CHECK(s.cudnn_ragged);
  CHECK(s.attention_deterministic);
  CHECK(s.cudnn_backward_tile == 8192);
  CHECK(s.cudnn_workspace_mib == -1);
  CHECK(s.moe_gemm == mt::MoeGemmChoice::loop);
  CHECK(s.moe_gemm_streams == 4);
  CHECK(s.delta_rule == mt::DeltaRuleChoice::chunked);
  CHECK_FALSE(s.profile_ops);
  CHECK(s.tier_io == mt::TierIoChoice::automatic);
  CHECK(s.step_rates == mt::StepRatesChoice::cached);
  CHECK(s.backend == mt::BackendChoice::automatic);
  CHECK(mt::switch_variables().size() == 13);
}

TEST_CASE("runtime switches: environment variables override the base", "[runtime_switches]") {
  for (const mt::SwitchVariable& sv : mt::switch_variables()) unsetenv(std::string(sv.variable).c_str());
  mt::RuntimeSwitches from_config;  // a base other than the defaults
  from_config.attention = mt::AttentionChoice::ours;
  from_config.cudnn_backward_tile = 0;
  CHECK(mt::with_environment(from_config).attention == mt::AttentionChoice::ours);
  {
    EnvVar attention("MEGATRAIN_ATTENTION", "cudnn"), tile("MEGATRAIN_CUDNN_BACKWARD_TILE", "1024"),
        ragged("MEGATRAIN_CUDNN_RAGGED", "0"), mib("MEGATRAIN_CUDNN_WORKSPACE_MIB", "0"),
        streams("MEGATRAIN_MOE_GEMM_STREAMS", "1"), profile("MEGATRAIN_PROFILE_OPS", "1"),
        backend("MEGATRAIN_BACKEND", "cpu"), tier("MEGATRAIN_TIER_IO", "threads"),
        delta("MEGATRAIN_DELTA_RULE", "recurrent"), gemm("MEGATRAIN_MOE_GEMM", "grouped"),
        buckets("MEGATRAIN_CUDNN_SEQ_BUCKETS", "0"), det("MEGATRAIN_ATTENTION_DETERMINISTIC", "0"),
        rates("MEGATRAIN_STEP_RATES", "probe");
    const mt::RuntimeSwitches s = mt::with_environment(from_config);
    CHECK(s.attention == mt::AttentionChoice::cudnn);
    CHECK(s.cudnn_backward_tile == 1024);
    CHECK_FALSE(s.cudnn_ragged);
    CHECK(s.cudnn_workspace_mib == 0);
    CHECK(s.moe_gemm_streams == 1);
    CHECK(s.profile_ops);
    CHECK(s.backend == mt::BackendChoice::cpu);
    CHECK(s.tier_io == mt::TierIoChoice::threads);
    CHECK(s.delta_rule == mt::DeltaRuleChoice::recurrent);
    CHECK(s.moe_gemm == mt::MoeGemmChoice::grouped);
    CHECK_FALSE(s.cudnn_seq_buckets);
    CHECK_FALSE(s.attention_deterministic);
    CHECK(s.step_rates == mt::StepRatesChoice::probe);
  }
  {
    EnvVar gemm("MEGATRAIN_MOE_GEMM", "cutlass");
    CHECK(mt::with_environment(from_config).moe_gemm == mt::MoeGemmChoice::cutlass);
  }
  EnvVar empty("MEGATRAIN_ATTENTION", "");  // set but empty: the base's value stands
  CHECK(mt::with_environment(from_config).attention == mt::AttentionChoice::ours);
}

TEST_CASE("runtime switches: a bad variable is one line naming it and the value", "[runtime_switches]") {
  CHECK(env_error("MEGATRAIN_ATTENTION", "flash") == "MEGATRAIN_ATTENTION must be ours, cudnn or auto, not 'flash'");
  CHECK(env_error("MEGATRAIN_CUDNN_RAGGED", "yes") == "MEGATRAIN_CUDNN_RAGGED must be 0 or 1, not 'yes'");
  CHECK(env_error("MEGATRAIN_ATTENTION_DETERMINISTIC", "2") ==
        "MEGATRAIN_ATTENTION_DETERMINISTIC must be 0 or 1, not '2'");
  CHECK(env_error("MEGATRAIN_CUDNN_BACKWARD_TILE", "100") ==
        "MEGATRAIN_CUDNN_BACKWARD_TILE must be 0 or a power of two of at least 128, not '100'");
  CHECK(env_error("MEGATRAIN_CUDNN_WORKSPACE_MIB", "-1") ==
        "MEGATRAIN_CUDNN_WORKSPACE_MIB must be a count of MiB, not '-1'");
  CHECK(env_error("MEGATRAIN_MOE_GEMM", "batched") ==
        "MEGATRAIN_MOE_GEMM must be loop, grouped or cutlass, not 'batched'");
  CHECK(env_error("MEGATRAIN_MOE_GEMM_STREAMS", "5") == "MEGATRAIN_MOE_GEMM_STREAMS must be 1 to 4, not '5'");
  CHECK(env_error("MEGATRAIN_DELTA_RULE", "fast") == "MEGATRAIN_DELTA_RULE must be chunked or recurrent, not 'fast'");
  CHECK(env_error("MEGATRAIN_BACKEND", "rocm") == "MEGATRAIN_BACKEND='rocm': expected cpu or cuda");
  CHECK(env_error("MEGATRAIN_TIER_IO", "aio") == "MEGATRAIN_TIER_IO must be threads or auto, not 'aio'");
  CHECK(env_error("MEGATRAIN_STEP_RATES", "guess") ==
        "MEGATRAIN_STEP_RATES must be cached, probe or constants, not 'guess'");
}
