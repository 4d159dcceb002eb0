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
// window, in that order). Invariant: only cudnn_sdpa_frontend.cpp includes cudnn-frontend; a graph that fails keeps its
// first failure's text and is never run.
#pragma once
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "kernels/attention/cudnn_attention.h"
#include "kernels/attention/cudnn_sdpa_graph.h"

namespace mt::cuda {

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
