// The runtime switches: how a run executes (attention kernels, cuDNN's graphs, the experts' GEMMs, the delta rule, op
// profiling, the state tier's I/O, the backend), never what it computes beyond bitwise repeatability.
// Invariant: one typed value per switch; the environment variables of switch_variables() are read here and nowhere
// else, and a bad value is one error line naming the variable and the value.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mt {

// MEGATRAIN_ATTENTION: ours (kernels/attention/attention.cu always), cudnn (cuDNN wherever it covers the
// case, whatever its workspace), auto (per direction: plan/cudnn_attention_plan.h).
enum class AttentionChoice { ours, cudnn, automatic };
// MEGATRAIN_MOE_GEMM: the experts' GEMMs one per expert (loop), or one grouped call: cuBLAS's (grouped: fp32 problems
// only, cuBLAS refuses bf16 ones) or CUTLASS's Hopper grouped GEMM (cutlass: bf16 problems only, on sm_90 GPUs; fp32
// ones, and bf16 ones it cannot take, run as the loop). kernels/runtime/grouped_gemm.h.
enum class MoeGemmChoice { loop, grouped, cutlass };
// MEGATRAIN_DELTA_RULE: the chunked gated delta rule kernel, or the token-by-token one.
enum class DeltaRuleChoice { chunked, recurrent };
// MEGATRAIN_TIER_IO: io_uring where the kernel grants a ring, or always a thread pool.
enum class TierIoChoice { automatic, threads };
// MEGATRAIN_STEP_RATES: the plan's rates (plan/step_rates.h) from the machine's cache file, probed where it has
// none or a bad one; probed again and the file rewritten; or the constants measured on the H200 node.
enum class StepRatesChoice { cached, probe, constants };
// MEGATRAIN_BACKEND: CUDA where a GPU is visible, else the CPU reference; or forced.
enum class BackendChoice { automatic, cpu, cuda };

// The spelling of each value, as the environment writes it.
template <typename E>
struct SwitchName {
  std::string_view name;
  E value;
};
inline constexpr SwitchName<AttentionChoice> kAttentionNames[] = {
    {"ours", AttentionChoice::ours}, {"cudnn", AttentionChoice::cudnn}, {"auto", AttentionChoice::automatic}};
inline constexpr SwitchName<MoeGemmChoice> kMoeGemmNames[] = {
    {"loop", MoeGemmChoice::loop}, {"grouped", MoeGemmChoice::grouped}, {"cutlass", MoeGemmChoice::cutlass}};
inline constexpr SwitchName<DeltaRuleChoice> kDeltaRuleNames[] = {{"chunked", DeltaRuleChoice::chunked},
                                                                  {"recurrent", DeltaRuleChoice::recurrent}};
inline constexpr SwitchName<TierIoChoice> kTierIoNames[] = {{"auto", TierIoChoice::automatic},
                                                            {"threads", TierIoChoice::threads}};
inline constexpr SwitchName<StepRatesChoice> kStepRatesNames[] = {{"cached", StepRatesChoice::cached},
                                                                  {"probe", StepRatesChoice::probe},
                                                                  {"constants", StepRatesChoice::constants}};
inline constexpr SwitchName<BackendChoice> kBackendNames[] = {
    {"auto", BackendChoice::automatic}, {"cpu", BackendChoice::cpu}, {"cuda", BackendChoice::cuda}};

const char* attention_choice_name(AttentionChoice c);

// The defaults below equal plan/cudnn_attention_plan.h's kCudnnBackwardTile and plan/gemm_workspace.h's
// kExpertGemmStreams (a test holds them equal).
inline constexpr int64_t kDefaultCudnnBackwardTile = 8192;
inline constexpr int kMaxMoeGemmStreams = 4;

struct RuntimeSwitches {
  AttentionChoice attention = AttentionChoice::automatic;
  bool cudnn_seq_buckets = true;         // varying lengths share bucketed graphs; false: one graph per length
  bool cudnn_ragged = true;              // packed segments through ragged offsets; false: the padded graphs
  bool attention_deterministic = true;   // cuDNN's deterministic backward; false: its faster atomic one
  int64_t cudnn_backward_tile = kDefaultCudnnBackwardTile;  // 0: never tiled; else a power of two >= 128
  int64_t cudnn_workspace_mib = -1;      // -1: the memory plan's reserve; else cuDNN's workspace cap in MiB
  MoeGemmChoice moe_gemm = MoeGemmChoice::loop;
  int moe_gemm_streams = kMaxMoeGemmStreams;  // 1 to kMaxMoeGemmStreams
  DeltaRuleChoice delta_rule = DeltaRuleChoice::chunked;
  bool profile_ops = false;              // the GPU time of every op in bench's report
  TierIoChoice tier_io = TierIoChoice::automatic;
  // the machine's probe, cached (plan/step_rates.h); constants: the H200 node's figures on any card
  StepRatesChoice step_rates = StepRatesChoice::cached;
  BackendChoice backend = BackendChoice::automatic;

  bool operator==(const RuntimeSwitches&) const = default;
};

bool valid_cudnn_backward_tile(int64_t tile);  // 0, or a power of two of at least 128

// One switch: its name (RuntimeSwitches' member), its environment variable.
struct SwitchVariable {
  std::string_view key;
  std::string_view variable;
};
// Every switch, in RuntimeSwitches' order.
const std::vector<SwitchVariable>& switch_variables();

// `base` with each set, non-empty environment variable of switch_variables() over it; a bad value throws mt::Error
// naming the variable and the value (e.g. "MEGATRAIN_ATTENTION must be ours, cudnn or auto, not 'x'").
RuntimeSwitches with_environment(RuntimeSwitches base);
// The defaults with the environment over them: what the commands that read no config (bench, bench-optim,
// bench-delta-rule, calc-resource) take, once at their start. Config::runtime is the config's section with them over it.
RuntimeSwitches environment_switches();

}  // namespace mt
