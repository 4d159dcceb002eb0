// cuDNN's fused attention for one AttnShape and variant (direction, deterministic backward, padding, causal or a tile
// below the diagonal, ragged offsets, sinks) as a cudnn-frontend 1.32 graph of one SDPA node (its composite
// implementation: the runtime fusion engine's graph, not the unified node the frontend's AUTO prefers where cuDNN has
// it) or SDPA-backward node: the causal mask (top-left diagonal band, right bound 0), the sliding window (left bound),
// padding (seq_len tensors), ragged offsets, sinks (cuDNN 9.13 and later), the deterministic algorithm, q/k and v head
// dims of their own, the stats (lse) our backward reads; its plan from the heuristics (modes A, then FALLBACK;
// non-deterministic engines skipped where determinism is asked), run with a variant pack keyed by our Uids. The
// frontend keeps its own side tensors (the backward's Σ dO·O, a non-deterministic backward's fp32 dQ accumulator,
// zeroed before cuDNN 9.6, its full-length padding workaround of cuDNN <= 9.15) in the workspace it reports, and spells
// the masks per cuDNN version. What 1.32 cannot express as attributes, and so goes through a score modifier of ours
// (scores in, scores out, op for op as the frontend lowers its own): the soft-cap (Gemma 2) and ALiBi with our slopes
// (Baichuan 2; the frontend's alibi_mask computes slopes of its own), because 1.32 refuses a score modifier beside its
// causal, window and padding attributes, so that modifier builds those masks too (soft-cap, ALiBi, padding, causal,
// window, in that order); what it cannot build at all is plan/cudnn_attention_plan.h's cudnn_frontend_gap. The only
// way CudnnAttention builds a graph. Invariant: only cudnn_sdpa_frontend.cpp includes cudnn-frontend; a graph's
// non-virtual tensors are the Uid ones below; a graph that fails keeps its first failure's text and is never run.
#pragma once
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "kernels/attention/cudnn_attention.h"

namespace mt::cuda {

// A graph's non-virtual tensors (the variant pack's device pointers).
enum Uid : int64_t {
  uid_q = 1,
  uid_k,
  uid_v,
  uid_o,
  uid_stats,
  uid_do,
  uid_dq,
  uid_dk,
  uid_dv,
  uid_seq_q,
  uid_seq_kv,
  uid_sinks,
  uid_alibi,
  uid_q_ragged,
  uid_kv_ragged
};

// Bytes rounded up to the 256-byte unit our workspace is carved in.
constexpr int64_t align_up(int64_t n) { return (n + 255) / 256 * 256; }

// The scale on the scores (the shape's, else 1/√head_dim) and the sliding window the graph masks (0: none, also where
// the window covers the sequence).
float sdpa_scale(const AttnShape& s);
int64_t sdpa_window(const AttnShape& s);

// Which graph of a shape: CudnnAttention::graph's key beyond the shape.
struct SdpaGraphSpec {
  bool backward = false;
  bool deterministic = true;  // a backward's dQ straight into dQ (false: through an fp32 accumulator by atomics)
  bool padding = false;       // the padding mask of seq_len_q / seq_len_kv (uid_seq_q, uid_seq_kv)
  bool causal = true;         // false: a tile below the diagonal of the tiled backward, unmasked
  bool ragged = false;        // sequences at per-sequence offsets (uid_q_ragged, uid_kv_ragged); padding must be set
  bool sinks = false;         // the forward's attention sinks (uid_sinks)
};

// Builds the graph of shape s for compute capability sm_version (90: Hopper) as far as needs no GPU and no handle:
// the frontend's validation and its lowering into cuDNN's operation graph, which the cuDNN this build links
// finalizes. Empty where it does; else the first failure's text. The host test of every variant (tests/gpu).
std::string sdpa_lowering_error(const AttnShape& s, const SdpaGraphSpec& spec, int sm_version);

class SdpaGraph {
 public:
  // Builds the graph of shape s and its plan; info says how it went (ok, engine, knobs, the frontend's workspace, or
  // the first failure).
  SdpaGraph(cudnnHandle_t handle, const AttnShape& s, const SdpaGraphSpec& spec, CudnnPlanInfo& info);
  ~SdpaGraph();
  SdpaGraph(const SdpaGraph&) = delete;
  SdpaGraph& operator=(const SdpaGraph&) = delete;

  // The probe's engine survey: every engine config the heuristics offered (modes A and FALLBACK, in order), then the
  // one-knob variations of the first that determinism allows (at most 64 values a knob).
  std::vector<CudnnEngineConfig> survey(bool deterministic) const;
  // Runs config c from now on, its engine, knobs and workspace in info; false (the plan kept, why in error) where it
  // does not build.
  bool use_config(const CudnnEngineConfig& c, CudnnPlanInfo& info, std::string& error);
  // Runs the plan over the pack's device tensors with `workspace` (info.workspace_bytes); throws on failure.
  void execute(cudnnHandle_t handle, std::unordered_map<int64_t, void*>& pack, void* workspace) const;

 private:
  struct Impl;  // the frontend's graph and the chosen plan's index
  std::unique_ptr<Impl> impl_;
};

}  // namespace mt::cuda
