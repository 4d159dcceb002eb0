// The runtime switches' environment overrides (see runtime_switches.h).
#include "core/runtime_switches.h"

#include <cstdlib>
#include <span>

#include "core/error.h"

namespace mt {
namespace {

// The variable's text; empty where it is unset.
std::string variable_text(std::string_view variable) {
  const char* v = std::getenv(std::string(variable).c_str());
  return v == nullptr ? "" : v;
}

// A named value, or one error line `message` (it names the variable; {} is the value).
template <typename E>
E named(std::span<const SwitchName<E>> names, const std::string& text, std::string_view variable,
        std::string_view expected) {
  for (const SwitchName<E>& n : names)
    if (n.name == text) return n.value;
  throw Error(MT_FORMAT("{} must be {}, not '{}'", variable, expected, text));
}

bool zero_or_one(const std::string& text, std::string_view variable) {
  MT_REQUIRE(text == "0" || text == "1", "{} must be 0 or 1, not '{}'", variable, text);
  return text == "1";
}

// A decimal integer; `ok` false where the text is not one.
int64_t integer(const std::string& text, bool& ok) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  ok = !text.empty() && *end == '\0';
  return v;
}

}  // namespace

const char* attention_choice_name(AttentionChoice c) {
  return c == AttentionChoice::ours ? "ours" : c == AttentionChoice::cudnn ? "cudnn" : "auto";
}

bool valid_cudnn_backward_tile(int64_t tile) { return tile == 0 || (tile >= 128 && (tile & (tile - 1)) == 0); }

const std::vector<SwitchVariable>& switch_variables() {
  static const std::vector<SwitchVariable> variables = {
      {"attention", "MEGATRAIN_ATTENTION"},
      {"cudnn_seq_buckets", "MEGATRAIN_CUDNN_SEQ_BUCKETS"},
      {"cudnn_ragged", "MEGATRAIN_CUDNN_RAGGED"},
      {"attention_deterministic", "MEGATRAIN_ATTENTION_DETERMINISTIC"},
      {"cudnn_backward_tile", "MEGATRAIN_CUDNN_BACKWARD_TILE"},
      {"cudnn_workspace_mib", "MEGATRAIN_CUDNN_WORKSPACE_MIB"},
      {"moe_gemm", "MEGATRAIN_MOE_GEMM"},
      {"moe_gemm_streams", "MEGATRAIN_MOE_GEMM_STREAMS"},
      {"delta_rule", "MEGATRAIN_DELTA_RULE"},
      {"profile_ops", "MEGATRAIN_PROFILE_OPS"},
      {"tier_io", "MEGATRAIN_TIER_IO"},
      {"step_rates", "MEGATRAIN_STEP_RATES"},
      {"backend", "MEGATRAIN_BACKEND"},
  };
  return variables;
}

RuntimeSwitches with_environment(RuntimeSwitches s) {
  for (const SwitchVariable& sv : switch_variables()) {
    const std::string text = variable_text(sv.variable);
    if (text.empty()) continue;
    const std::string_view key = sv.key, var = sv.variable;
    bool ok = true;
    if (key == "attention") {
      s.attention = named<AttentionChoice>(kAttentionNames, text, var, "ours, cudnn or auto");
    } else if (key == "cudnn_seq_buckets") {
      s.cudnn_seq_buckets = zero_or_one(text, var);
    } else if (key == "cudnn_ragged") {
      s.cudnn_ragged = zero_or_one(text, var);
    } else if (key == "attention_deterministic") {
      s.attention_deterministic = zero_or_one(text, var);
    } else if (key == "cudnn_backward_tile") {
      s.cudnn_backward_tile = integer(text, ok);
      MT_REQUIRE(ok && valid_cudnn_backward_tile(s.cudnn_backward_tile),
                 "{} must be 0 or a power of two of at least 128, not '{}'", var, text);
    } else if (key == "cudnn_workspace_mib") {
      s.cudnn_workspace_mib = integer(text, ok);
      MT_REQUIRE(ok && s.cudnn_workspace_mib >= 0, "{} must be a count of MiB, not '{}'", var, text);
    } else if (key == "moe_gemm") {
      s.moe_gemm = named<MoeGemmChoice>(kMoeGemmNames, text, var, "loop, grouped or cutlass");
    } else if (key == "moe_gemm_streams") {
      const int64_t n = integer(text, ok);
      MT_REQUIRE(ok && n >= 1 && n <= kMaxMoeGemmStreams, "{} must be 1 to {}, not '{}'", var, kMaxMoeGemmStreams,
                 text);
      s.moe_gemm_streams = static_cast<int>(n);
    } else if (key == "delta_rule") {
      s.delta_rule = named<DeltaRuleChoice>(kDeltaRuleNames, text, var, "chunked or recurrent");
    } else if (key == "profile_ops") {
      s.profile_ops = zero_or_one(text, var);
    } else if (key == "tier_io") {
      s.tier_io = named<TierIoChoice>(kTierIoNames, text, var, "threads or auto");
    } else if (key == "step_rates") {
      s.step_rates = named<StepRatesChoice>(kStepRatesNames, text, var, "cached, probe or constants");
    } else {
      MT_REQUIRE(text == "auto" || text == "cpu" || text == "cuda", "{}='{}': expected cpu or cuda", var, text);
      s.backend = named<BackendChoice>(kBackendNames, text, var, "cpu or cuda");
    }
  }
  return s;
}

RuntimeSwitches environment_switches() { return with_environment({}); }

}  // namespace mt
