// The predicted time of one steady training step of a resolved run (resolve_auto, then the MoE layers that keep and
// the resident optimizer state) on a machine's rates (plan/step_rates.h), in named parts. The plan chooses by it
// (plan_step, plan_resident) and bench prints it beside the measured step.
// - Compute: every pass's forward, backward and recompute, by op class at its own rate over the probe's GEMM rate
//   (StepRates::gpu_flops / kStepFlopsPerGemmFlop): dense matmuls (projections, dense MLPs, the router, the shared
//   expert), the LM head (its forward and backward fused), attention by its model FLOPs at seq_len (model/flops.h:
//   forward a third, backward two thirds; cuDNN's backward slower in calls of fewer sequences), and the MoE experts'
//   GEMMs by their rows per expert (a micro-batch's tokens × top_k / experts: smaller groups run slower). Recompute:
//   a recomputing layer's forward again in its backward (a keeping MoE layer's experts only their down projection,
//   from the kept rows), and a non-keeping MoE layer's router and gate and up GEMMs (moe_recompute_flops_per_token).
// - The pipeline, simulated stage by stage in the engine's acquisition order (engine.h pass_region_order) as
//   kernels/runtime/pipeline.cu runs it: run.weight_slots slots planned per pass (a region still in a slot is not
//   copied again; a copy starts once the stage that last used its slot is released, and a pass's copies once the
//   compute has finished the previous pass), a stage's compute once its copy has landed, each backward's fp32
//   gradient out through its buffer (the layers alternate two; a stage waits for its buffer's previous copy out),
//   in a pass after the first the host's sum so far in first (on the gradient stream, for the GPU to add); copies
//   at the rates training measured. Regions the GPU keeps resident (run.resident_regions) copy nothing and are
//   updated on the GPU at the step's start. In the step's first pass a host region's copy waits for the host's
//   parameters pass to have updated it and every host region before it (plan/step_bound.h's rule), and its
//   gradient's copy out for the moments pass (which runs after it, from the last region back) to have read the
//   previous gradient.
// - The step: from the first forward's start to the last gradient's arrival. stream_wait_s is what the compute
//   waits for the pipeline with every region already updated, optimizer_wait_s what the first pass waits more.
// Not modelled: activation checkpoints in host memory (their copies), the NVMe state tier (resource_advice.h's
// nvme_timing adds it), data parallelism's reductions.
// Invariant: the parts add up to step_s (compute_s + resident_update_s + stream_wait_s + optimizer_wait_s); every
// efficiency is a named constant below with the measurement it was fitted on; the acquisitions are the engine's.
#pragma once
#include <cstdint>
#include <string>

#include "model/model_spec.h"
#include "model/param_layout.h"
#include "plan/memory_plan.h"
#include "plan/step_bound.h"

namespace mt {

// Model FLOP/s of each op class, as a share of the probe's GEMM rate. Fitted on bench's steady steps
// (tests/plan/test_step_time.cpp holds the rows and the model's error on each).
// Dense matmuls with their norms and element-wise ops: Qwen2.5-3B and -7B at 1024 on the H100 (every layer's
// projections and SwiGLU; the per-op profile puts GEMMs at 630-650 TFLOP/s of the step's 66 %, SwiGLU, RMSNorm and
// adds at 11 %). Wider layers run closer to the GEMM's rate: 0.80 at Qwen2.5-3B's hidden 2048, 0.86 at
// Qwen2.5-7B's 3584 (at 0.80 the 7B's steps were predicted 7-8 % long on two H100 nodes, the 3B's within 3 %),
// linear in the hidden size between them and held outside (dense_share_of_gemm).
inline constexpr double kDenseShareOfGemm = 0.80;
inline constexpr double kDenseShareOfGemmWide = 0.86;
double dense_share_of_gemm(int64_t hidden_size);
// The LM head with its cross-entropy (logits chunked): 510 TFLOP/s against 630-650 for the layers' GEMMs in the
// H200's profile of Qwen2.5-3B.
inline constexpr double kHeadShareOfGemm = 0.72;
// cuDNN's attention in model FLOPs (flops.h counts every key; a causal call computes half): the H100's probe of
// causal bf16 attention (docs/PERFORMANCE.md, twenty-fifth session; 32 heads of 128) ran 483 / 309 TFLOP/s forward
// / backward at 32 × 1024 and 623 / 431 at 8 × 4096 on the causal count, twice that in model FLOPs, against its
// 725 TFLOP/s GEMM; interpolated in log2(seq_len) between the two, held outside.
inline constexpr double kAttentionForwardShare1k = 2 * 483.0 / 725.0, kAttentionForwardShare4k = 2 * 623.0 / 725.0;
inline constexpr double kAttentionBackwardShare1k = 2 * 309.0 / 725.0, kAttentionBackwardShare4k = 2 * 431.0 / 725.0;
// cuDNN's backward in calls of half the sequences, each halving (the H200's attention probe at 8 × 4096: one call
// 454 TFLOP/s, three sequences a call 438, one 395: 0.955 a halving).
inline constexpr double kAttentionBackwardPerHalving = 0.955;
// The experts' grouped GEMMs with their routing, permutation and combine: share = kExpertShareOfGemm × rows /
// (rows + kExpertHalfRows), rows per expert a micro-batch. Fitted on Qwen3-30B-A3B (768-wide experts, 2048 rows)
// and GPT-OSS-120B (2880-wide, 1024 rows) at 4096.
inline constexpr double kExpertShareOfGemm = 0.60;
inline constexpr double kExpertHalfRows = 512.0;
// The copies' rates in training as shares of the probe's page-locked rate: the H100 copied 55 GB/s each way alone and
// 41.7 GB/s in (the fp32 master into the staging buffer, beside the optimizer's passes over host memory) and 49.7
// out during Qwen2.5-7B's steps (issue #49).
inline constexpr double kH2dShareInTraining = 41.7 / 55.0;
inline constexpr double kD2hShareInTraining = 49.7 / 55.0;
// The host's moments pass against its parameters pass (both 20 B a parameter; it reads the gradient the first pass's
// copies out wait for): 0.63-0.78 s against 0.91-1.01 s over Qwen3-30B-A3B's 5.9 B host parameters on the H200 node
// (docs/PERFORMANCE.md, thirteenth session).
inline constexpr double kMomentsPerParametersPass = 1.35;
// The GPU's update of resident regions (kernels/runtime/resident_regions.h): 34 bytes a parameter (master, moments
// and gradient read, master, moments and the bf16 weights written) at 2.7 TB/s (80 % of the H100's 3.35 TB/s HBM).
inline constexpr double kResidentUpdateBytesPerParameter = 34.0;
inline constexpr double kResidentUpdateBytesPerSecond = 2.7e12;

struct StepTime {
  // The compute of every pass, by op class (the recompute included); recompute_s is the share of them that
  // recomputing layers and non-keeping MoE layers add in backward.
  double dense_s = 0, head_s = 0, attention_s = 0, experts_s = 0;
  double recompute_s = 0;
  double compute_s = 0;            // dense_s + head_s + attention_s + experts_s
  double resident_update_s = 0;    // the GPU's update of the resident regions
  double stream_wait_s = 0;        // the compute waiting for weight copies, gradient buffers and the last gradients
  double optimizer_wait_s = 0;     // the first pass waiting more for the host's parameters pass
  double step_s = 0;
  double h2d_bytes = 0, d2h_bytes = 0;  // a step's copies
};

// Model FLOPs per token that MoE layer `layer`'s backward recomputes when it does not keep (0 for a dense layer).
double moe_recompute_flops_per_token(const ModelSpec& spec, int64_t layer);

StepTime predict_step_time(const ModelSpec& spec, const RunShape& run, const StepRates& rates);
// The same over the spec's layout (make_param_layout(spec)), for loops that weigh many shapes of one model.
StepTime predict_step_time(const ModelSpec& spec, const ParamLayout& layout, const RunShape& run,
                           const StepRates& rates);
// "predicted step 4.312 s: compute 3.901 s (dense 0.9, head 0.4, attention 1.2, experts 1.4; recompute 0.3),
// resident update 0.02 s, waiting 0.21 s for copies and 0.18 s for the host's optimizer".
std::string describe_step_time(const StepTime& t);

}  // namespace mt
