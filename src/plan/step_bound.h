// Where a training step stops being compute-bound: per step the GPU computes model FLOPs on the active parameters
// (model/flops.h), while every layer's whole region (all of an MoE layer's experts) crosses PCIe each time a pass
// acquires it and its fp32 gradient crosses back once per pass; and the step's first pass reaches each region only
// once the host optimizer's parameters pass has updated it and every host region before it (the moments pass
// overlaps the head and backward; later passes find the weights updated), and its copy has crossed. Regions the GPU
// updates (run.resident_regions) wait for nothing.
// The first pass's wait is the largest of, over the host regions r, the parameters pass up to r and r's copy, less
// the forward (a third of the FLOPs) of the regions before r at the pass's tokens: a host region with nothing
// computed before it (the first, when nothing is resident) is waited for whatever the batch; for the others, enough
// tokens hide it. An MoE layer carries num_experts / top_k times more weight bytes per FLOP than a dense one, so it
// needs that many times more tokens.
// Invariant: the transfer bytes follow the engine's acquisition order (engine.h pass_region_order) and the plan's
// stream dtype; the rates are the run's (plan/step_rates.h: measured on its machine, or cached), StepRates' defaults
// the H200 node's (docs/PERFORMANCE.md) where none are given.
#pragma once
#include <cstdint>

#include "model/model_spec.h"
#include "plan/memory_plan.h"

namespace mt {

struct StepRates {
  double gpu_flops = 400e12;  // model FLOP/s the GPU sustains on large GEMMs (H200 bf16)
  double pcie_bytes = 55e9;   // page-locked bytes/s each way (H200, PCIe Gen5)
  // The parameters pass (20 B a parameter) beside the pipeline's copies, as training ran it on the H200 node
  // (bench's parameters_pass_gparams_per_s): 5.9 G parameters/s over the Qwen3-30B-A3B shape's 5.9 B host
  // parameters, 5.5 over Qwen2.5-3B's 2.8 B. Per NUMA domain: the store's ranks (run.ranks) each update their
  // slice on their own.
  double parameters_pass_params = 5.9e9;

  bool operator==(const StepRates&) const = default;
};

struct StepBound {
  double flops_per_token = 0;        // model FLOPs per token (active parameters, attention at run.seq_len)
  double h2d_bytes_per_pass = 0, d2h_bytes_per_pass = 0;
  double transfer_seconds_per_pass = 0;  // the slower direction
  double parameters_pass_seconds = 0;    // the host's parameters pass (all but the resident regions)
  double unhidden_wait_seconds = 0;      // the first pass's wait for host regions with nothing computed before them
  double first_pass_wait_seconds = 0;    // its whole wait at the run's tokens per pass
  int64_t pcie_bound_tokens = 0;       // tokens per pass below which transfers outlast the compute
  int64_t optimizer_bound_tokens = 0;  // tokens per pass from which the first pass waits only unhidden_wait
};

StepBound step_bound(const ModelSpec& spec, const RunShape& run, const StepRates& rates = {});

}  // namespace mt
