// The memory plan of a training run: host bytes (the HostStore, per parameter and per rank) and GPU bytes
// (weight slots, gradient buffers, activation checkpoints, segment activations, the internals of the layers
// that save them instead of recomputing, one micro-batch's layer workspace, the LM head's logits chunk, the
// cuBLASLt workspace) as pure functions of the shapes.
// Invariant: every figure mirrors an allocation the code makes — HostStore (store/host_store.h), the CUDA
// pipeline's slots and gradient buffers (kernels/runtime/pipeline.cu), Engine::activations_for and
// DecoderWorkspace (engine/), the checkpoint stores (engine/checkpoint_store.h, kernels/runtime/host_checkpoints.h),
// CudaBackend::head_loss and cuda::Gemm — so train's preflight and calc-resource agree with what a run allocates.
#pragma once
#include <cstdint>
#include <limits>
#include <vector>

#include "core/dtype.h"
#include "core/runtime_switches.h"
#include "engine/checkpoint_placement.h"
#include "model/model_spec.h"
#include "model/param_layout.h"
#include "store/offload_mode.h"

namespace mt {

struct RunShape {
  DType dtype = DType::bf16;            // compute dtype (activations, GPU weight slots)
  DType stream_dtype = DType::bf16;     // weights in host RAM that cross PCIe: bf16 copy, or fp32 master (cast on
                                        // the GPU through one fp32 staging buffer when dtype is bf16)
  int64_t seq_len = 1024;
  int64_t batch_size = 8;               // sequences per optimizer step
  int64_t micro_batch_size = 0;         // 0 = auto, as Engine::micro_batch_size_for
  int64_t passes = 1;                   // gradient_accumulation_steps (0 = auto, until resolve_auto)
  int64_t checkpoint_interval = 4;
  int64_t recompute_layers = std::numeric_limits<int64_t>::max();  // as EngineOptions: the first ones recompute
  int64_t moe_keep_layers = 0;          // as EngineOptions: the last ones of the MoE layers keep their expert
                                        // activations (plan/step_plan.h chooses it where auto)
  int64_t weight_slots = 2;
  int ranks = 1;                        // ranks of the node sharing the store
  OffloadMode offload = OffloadMode::none;  // store.offload: state kinds on the NVMe tier instead of RAM
  int64_t token_chunk = 0;              // tokens per feed-forward chunk, as EngineOptions (0 = the default)
  // How the run executes (core/runtime_switches.h): the plan sizes cuDNN attention by its attention switches.
  RuntimeSwitches runtime;
  // Attention through cuDNN where it covers the layer (plan/cudnn_attention_plan.h): the CUDA backend in bf16 with
  // runtime.attention auto or cudnn (cudnn_attention_for). cudnn_backward: cuDNN's backward's
  // workspace is reserved (resolve_auto sets it where the plan fits with it; otherwise our backward runs).
  bool cudnn_attention = false;
  bool cudnn_backward = false;
  bool packed = false;                  // batches of packed examples (data.packing, bench --pack): the cuDNN reserve
                                        // also holds one segment's gathered rows (CudnnAttentionPlan::reserve)
  // training.activation_checkpoints: gpu, host (page-locked host slots, two staging buffers on the GPU), or
  // automatic until resolve_auto (plan_gpu reads automatic as gpu).
  CheckpointPlacement checkpoints = CheckpointPlacement::gpu;
  // The store's leading regions whose optimizer state lives on the GPU (plan/resident_plan.h chooses them): the
  // weight slots and the fp32 staging buffer serve the largest of the other regions, and in one pass no gradient
  // buffer serves these (they accumulate in place).
  int64_t resident_regions = 0;
  // Sequences per call of cuDNN's backward at seq_len (0: the whole micro-batch); plan_resident
  // lowers it where the workspace it frees keeps more optimizer state on the GPU.
  int64_t cudnn_call_batch = 0;
};

// Whether a run's attention goes through cuDNN where covered: a GPU backend (gpu_bytes > 0), bf16, and the
// attention switch auto or cudnn.
bool cudnn_attention_for(DType dtype, int64_t gpu_bytes, const RuntimeSwitches& switches);

struct HostPlan {
  int64_t parameters = 0;
  // RAM bytes per parameter: fp32 master, Adam m, Adam v, fp32 gradient, streaming copy (bf16 mode only); the
  // kinds the offload mode puts on the NVMe tier count 0 here and 4 each in nvme_per_parameter.
  int64_t master = 4, exp_avg = 4, exp_avg_sq = 4, grad = 4, stream_copy = 0;
  int64_t bytes_per_parameter() const { return master + exp_avg + exp_avg_sq + grad + stream_copy; }
  int64_t store_bytes = 0;              // parameters × bytes_per_parameter
  std::vector<int64_t> rank_bytes;      // bytes of each rank's slices (HostStore::slice_of)
  // The state tier (store/tier_layout.h, store/state_tier.h): its files, every rank's (units padded), and the
  // ranks' staging buffers in RAM.
  OffloadMode offload = OffloadMode::none;
  int64_t nvme_per_parameter = 0;
  int64_t nvme_bytes = 0;
  int64_t staging_bytes = 0;
  // Activation checkpoints placed in host memory (GpuPlan::host_checkpoints; plan_memory sets it).
  int64_t checkpoint_bytes = 0;
  int64_t ram_bytes() const { return store_bytes + staging_bytes + checkpoint_bytes; }
  int64_t nvme_step_bytes() const { return 2 * nvme_bytes; }  // each state byte read once and written once a step
};

// Seconds a step's state traffic takes at `nvme_gbs` GB/s of aggregate read+write bandwidth (0 without offload).
double nvme_step_seconds(const HostPlan& host, double nvme_gbs);

struct GpuPlan {
  int64_t micro_batch_size = 0;         // sequences (resolved from auto)
  int64_t weight_slots = 0;             // slots × largest streamed region × dtype size (+ the fp32 staging buffer)
  int64_t grad_buffers = 0;             // embedding, head and two buffers of the largest layer, fp32, less those of
                                        // resident regions in one pass (+ a 64 MiB chunk of the host sum with several
                                        // passes)
  int64_t checkpoints = 0;              // ceil(L / c) × pass tokens × hidden × dtype size; with the host placement
                                        // its kCheckpointStagingBuffers staging buffers of that size
  int64_t host_checkpoints = 0;         // host placement: ceil(L / c) checkpoints in host RAM (not in total())
  int64_t segment = 0;                  // (min(c, L) − 1) segment inputs + current, next, grad
  int64_t saved_layers = 0;             // layers recompute_layers.. L−1: internals over the pass (and the input
                                        // where it is not a checkpoint)
  int64_t moe_kept = 0;                 // the last moe_keep_layers MoE layers' kept expert activations over the
                                        // pass (engine/moe_block.h moe_kept_bytes)
  int64_t layer_workspace = 0;          // DecoderWorkspace for one micro-batch (its feed-forward per token chunk), and the attention backward's fp32
                                        // dk/dv partials of the GQA group splits (at most one split per query head)
  int64_t head = 0;                     // logits chunk (fp32) + dlogits chunk + per-row losses
  int64_t batch_arrays = 0;             // input ids, targets, positions, segments, chunk ids, lengths, the
                                        // segments' virtual batches (int32)
  int64_t gemm_workspace = 0;           // cuBLASLt's and CUTLASS's (plan/gemm_workspace.h)
  int64_t rope_tables = 0;              // fp32 cos and sin of every RoPE table over max(positions, seq_len)
  // CudnnAttention's workspace (plan/cudnn_attention_plan.h: CudnnAttentionPlan::reserve, any batch length up to
  // seq_len) at the micro-batch shape, the widest covered layer's:
  // cuDNN's backward's graph and staging where run.cudnn_backward, else the forward's staging; 0 without
  // run.cudnn_attention. cudnn_backward_need: what cuDNN's backward would take (reported when it does
  // not fit and our backward runs instead). cudnn_backward_tile: the tile that backward runs in at seq_len
  // (CudnnAttentionPlan::backward_tile of the widest covered layer's shape; 0: one graph, or no cuDNN).
  int64_t attention_workspace = 0;
  int64_t cudnn_backward_need = 0;
  bool cudnn_backward = false;
  int64_t cudnn_backward_tile = 0;
  int64_t cudnn_call_batch = 0;  // sequences per cuDNN backward call at seq_len (the micro-batch or fewer)
  int64_t total() const {
    return weight_slots + grad_buffers + checkpoints + segment + saved_layers + moe_kept + layer_workspace + head +
           batch_arrays + gemm_workspace + rope_tables + attention_workspace;
  }
};

struct MemoryPlan {
  HostPlan host;
  GpuPlan gpu;
};

HostPlan plan_host(const ModelSpec& spec, DType stream_dtype, int ranks, OffloadMode offload = OffloadMode::none);
GpuPlan plan_gpu(const ModelSpec& spec, const RunShape& run);
// The same over the spec's layout (make_param_layout(spec)), for loops that plan many shapes of one model.
GpuPlan plan_gpu(const ModelSpec& spec, const ParamLayout& layout, const RunShape& run);
MemoryPlan plan_memory(const ModelSpec& spec, const RunShape& run);

// The fewest layers that must recompute for the plan to fit in gpu_bytes less a margin for the CUDA context,
// library workspaces and fragmentation (run.recompute_layers is ignored); L where nothing fits or gpu_bytes
// is 0 (the CPU backend recomputes, keeping host memory lean).
int64_t auto_recompute_layers(const ModelSpec& spec, RunShape run, int64_t gpu_bytes);
// Sequences per micro-batch when micro_batch_size is auto on a GPU of gpu_bytes: the largest of 16384 and 8192
// tokens whose layer workspace takes at most 5 % of the usable memory (larger GEMMs and more attention blocks per
// launch: 6 % faster at Qwen2.5-3B batch 64 on the H200), for models with MoE layers first 32768 tokens within 10 %
// (twice the rows per expert GEMM), else resolve_micro_batch's 4096 tokens (also without a GPU).
int64_t auto_micro_batch(const ModelSpec& spec, RunShape run, int64_t gpu_bytes);
// Bytes the plan may use on a GPU of gpu_bytes (the margin auto_recompute_layers leaves).
int64_t usable_gpu_bytes(int64_t gpu_bytes);
// Gradient accumulation passes when gradient_accumulation_steps is auto, on a GPU of gpu_bytes: among the pass
// counts that divide the batch and leave every pass at least kAutoPassTokens tokens, the one whose resolved plan
// fits and recomputes the fewest layers (fewest passes on a tie). A pass that size still hides the second stream of
// the weights under its compute, and each pass keeps more layers' internals instead of recomputing them (H200:
// Qwen2.5-3B batch 256 runs 456 TFLOP/s in 4 passes against 424 in one, Qwen2.5-7B batch 128 538 in 2 against
// 512; Qwen2.5-7B batch 64 in 2 passes of 32 768 tokens is slower than in one). 1 on the CPU backend (gpu_bytes 0)
// or where no count fits.
inline constexpr int64_t kAutoPassTokens = 65536;
int64_t auto_passes(const ModelSpec& spec, RunShape run, int64_t gpu_bytes, bool auto_recompute);
// The pass counts auto passes chooses among: 1, and each count that divides the batch and leaves every pass at least
// kAutoPassTokens tokens, ascending.
std::vector<int64_t> auto_pass_candidates(const RunShape& run);
// What a run leaves to the plan, resolved in order for a GPU of gpu_bytes (0: the CPU backend): with
// run.cudnn_attention, first with cuDNN's backward reserved (cudnn_backward), kept where the resolved
// plan fits the usable memory (the workspace is reserved before layers keep activations: at 8192 tokens it is worth
// more than the layers it makes recompute), else resolved again with our backward; then passes 0 becomes
// auto_passes; micro_batch_size 0 becomes auto_micro_batch; with auto_recompute, recompute_layers becomes
// auto_recompute_layers; recompute_layers is then at most L. Checkpoints automatic: all of that with them on the GPU,
// and again with them on the host (page-locked, two staging buffers on the GPU) where that plan does not fit the
// usable memory and this one does (gpu on the CPU backend). train's preflight, bench and calc-resource all resolve
// through it.
void resolve_auto(const ModelSpec& spec, RunShape& run, int64_t gpu_bytes, bool auto_recompute);

// Sequences per micro-batch, as the engine picks them (micro_batch_size 0 = about 4096 tokens).
int64_t resolve_micro_batch(const RunShape& run);
// Host bytes of a run on the CPU reference backend, where "GPU" buffers are fp32 host memory: the store plus
// the activations and workspace (no weight slots: the CPU backend reads the store directly).
int64_t cpu_backend_host_bytes(const ModelSpec& spec, const RunShape& run);

}  // namespace mt
