// Where a training step stops being compute-bound: per step the GPU computes model FLOPs on the active parameters
// (model/flops.h), while every layer's whole region (all of an MoE layer's experts) crosses PCIe each time the
// pass acquires it and its fp32 gradient crosses back once per pass, and the host optimizer passes over every
// parameter once per step, overlapped with the next step's forward. Below the tokens per step that cover the
// transfers (per pass) and the optimizer, the step waits for them; an MoE layer carries num_experts / top_k times
// more weight bytes per FLOP than a dense one, so it needs that many times more tokens.
// Invariant: the transfer bytes follow the engine's acquisition order (engine.h pass_region_order) and the plan's
// stream dtype; the rates are the H200 node's measured ones (docs/PERFORMANCE.md) unless given.
#pragma once
#include <cstdint>

#include "model/model_spec.h"
#include "plan/memory_plan.h"

namespace mt {

struct StepRates {
  double gpu_flops = 400e12;      // model FLOP/s the GPU sustains on large GEMMs (H200 bf16)
  double pcie_bytes = 55e9;       // page-locked bytes/s each way (H200, PCIe Gen5)
  double optimizer_params = 4e9;  // AdamW parameters/s on the node's cores (bench-optim, 16 threads)
};

struct StepBound {
  double flops_per_token = 0;        // model FLOPs per token (active parameters, attention at run.seq_len)
  double h2d_bytes_per_pass = 0, d2h_bytes_per_pass = 0;
  double transfer_seconds_per_pass = 0;  // the slower direction
  double optimizer_seconds = 0;
  int64_t pcie_bound_tokens = 0;       // tokens per pass below which transfers outlast the compute
  int64_t optimizer_bound_tokens = 0;  // tokens per step below which the optimizer outlasts the compute
  int64_t recommended_batch = 0;       // sequences of run.seq_len per step covering both (×1.25 margin)
  int64_t recommended_passes = 1;      // accumulation passes of at least pcie_bound_tokens each within it
};

StepBound step_bound(const ModelSpec& spec, const RunShape& run, const StepRates& rates = {});

}  // namespace mt
