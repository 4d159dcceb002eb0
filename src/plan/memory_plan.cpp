// Memory plan arithmetic (see memory_plan.h): each term names the allocation it mirrors.
#include "plan/memory_plan.h"

#include <algorithm>
#include <limits>

#include "backend/gated_delta_rule_scratch.h"
#include "backend/head_chunk.h"
#include "backend/segment_batch.h"
#include "core/error.h"
#include "engine/chunked_attention.h"
#include "engine/layer_internals.h"
#include "engine/moe_block.h"
#include "model/param_layout.h"
#include "plan/cudnn_attention_plan.h"
#include "plan/gemm_workspace.h"
#include "store/host_store.h"
#include "store/state_tier.h"
#include "store/tier_layout.h"
#include "transfer/checkpoint_store.h"

namespace mt {
namespace {

constexpr int64_t kGradientAddChunk = int64_t{64} << 20;  // the CUDA gradient sink's chunk, passes after the first
constexpr int64_t kAutoMicroBatchTokens = 4096;        // Engine::micro_batch_size_for

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool has_moe_layers(const ModelSpec& spec) {
  return std::any_of(spec.layers.begin(), spec.layers.end(), [](const LayerSpec& l) { return l.moe.active(); });
}

// The most experts of any MoE layer (0: no MoE layer).
int64_t most_experts(const ModelSpec& spec) {
  int64_t most = 0;
  for (const LayerSpec& l : spec.layers) most = std::max(most, l.moe.num_experts);
  return most;
}

// Bytes of DecoderWorkspace (engine/decoder_layer.h) for micro-batches of mb sequences of seq_len tokens: the
// internals of layers that save none, the scratch, one token chunk's dense feed-forward buffers, the MoE layers'
// buffers, and a normalised head's two [V, H] buffers.
int64_t decoder_workspace_bytes(const ModelSpec& s, int64_t mb, int64_t seq_len, int64_t token_chunk, int64_t es) {
  const InternalsWidths internals = max_internals_widths(s);
  const int64_t tokens = mb * seq_len;
  const int64_t mlp = kMlpChunkBuffers * token_chunk_for(tokens, token_chunk) * mlp_chunk_width(s) * es;
  const int64_t head = s.normalized_head ? s.vocab_size * s.hidden_size * (es + 4) : 0;
  const ScratchWidths scratch = scratch_widths(s);
  return tokens * (internals.elements() + scratch.elements()) * es +
         tokens * (internals.fp32_elements() + scratch.fp32_elements()) * 4 + mlp + head +
         moe_scratch_bytes(s, tokens, es);
}

// The activation-side terms (everything but weight slots and gradient buffers) in `es`-byte elements.
void plan_activations(const ModelSpec& s, const RunShape& run, int64_t es, GpuPlan& g) {
  const int64_t L = s.num_layers, c = run.checkpoint_interval, H = s.hidden_size, V = s.vocab_size;
  MT_ASSERT(run.passes >= 1 && c >= 1, "plan of an unresolved run shape (passes {}, checkpoint_interval {})",
            run.passes, c);
  const int64_t pass_seqs = run.batch_size / run.passes;
  const int64_t mb = resolve_micro_batch(run);
  const int64_t n = pass_seqs * run.seq_len * H * es;  // one hidden state of the pass
  const int64_t mb_tokens = mb * run.seq_len;
  g.micro_batch_size = mb;
  g.checkpoints = ceil_div(L, c) * n;
  g.host_checkpoints = 0;
  if (run.checkpoints == CheckpointPlacement::host) {  // engine/checkpoint_store.h: HostCheckpoints
    g.host_checkpoints = g.checkpoints;
    g.checkpoints = kCheckpointStagingBuffers * n;
  }
  g.segment = (std::min(c, L) - 1 + 3) * n;
  // Engine::activations_for: per saved layer allocate_internals (engine/layer_internals.h) over the pass.
  const int64_t pass_tokens = pass_seqs * run.seq_len;
  g.saved_layers = 0;
  for (int64_t i = std::min(run.recompute_layers, L); i < L; ++i) {
    const InternalsWidths w = saved_layer_widths(s, i);
    g.saved_layers += pass_tokens * w.elements() * es + pass_tokens * w.fp32_elements() * 4 + (i % c != 0 ? n : 0);
  }
  // Engine::activations_for: per keeping MoE layer allocate_moe_kept over the pass and its micro-batches.
  g.moe_kept = 0;
  for (int64_t i = 0; i < L; ++i)
    if (moe_layer_keeps(s, i, run.moe_keep_layers))
      g.moe_kept += moe_kept_bytes(s, i, pass_tokens, ceil_div(pass_seqs, mb), es);
  // CudnnAttention's workspace over the covered layers; kernels/attention/attention.cu's fp32 dk/dv partials of a GQA group
  // over the layers whose backward is ours (the widest layer's).
  int64_t attention_partials = 0, cudnn_forward = 0;
  const CudnnAttentionPlan cudnn_plan(run.runtime);
  g.cudnn_backward_need = 0;
  g.cudnn_backward_tile = 0;
  for (const LayerSpec& l : s.layers) {
    if (l.linear_mixer()) continue;
    const AttentionSpec& a = l.attention;
    // Latent attention's value head dim differs from its q/k one (V, O and their gradients are narrower).
    const int64_t v_head_dim = l.is_mla() ? l.mla.v_head_dim : 0;
    const bool cudnn = run.cudnn_attention && cudnn_layer_gap(a, run.dtype, v_head_dim).empty();
    if (cudnn) {
      // The micro-batch's call; an ALiBi layer's slopes are marked, not read (its backward never tiles).
      static constexpr float kAlibiMarker = 0.f;
      const AttnShape call{.batch = mb, .seq = run.seq_len, .n_heads = a.num_heads, .n_kv_heads = a.num_kv_heads,
                           .head_dim = a.head_dim, .v_head_dim = v_head_dim,
                           .alibi_slopes = a.alibi ? &kAlibiMarker : nullptr};
      const CudnnWorkspace w = cudnn_plan.reserve(call, run.cudnn_call_batch, run.packed);
      cudnn_forward = std::max(cudnn_forward, w.forward);
      if (w.backward > g.cudnn_backward_need) g.cudnn_backward_tile = cudnn_plan.backward_tile(call);
      g.cudnn_backward_need = std::max(g.cudnn_backward_need, w.backward);
    }
    const int64_t group = a.num_heads / std::max<int64_t>(a.num_kv_heads, 1);
    if (group > 1 && !(cudnn && run.cudnn_backward))
      attention_partials = std::max(attention_partials, 2 * group * mb_tokens * a.kv_dim() * 4);
  }
  g.cudnn_backward = run.cudnn_backward && g.cudnn_backward_need > 0;
  g.cudnn_call_batch = run.cudnn_call_batch > 0 ? std::min(run.cudnn_call_batch, mb) : mb;
  g.attention_workspace = g.cudnn_backward ? std::max(cudnn_forward, g.cudnn_backward_need) : cudnn_forward;
  // The CUDA gated delta rule's backward scratch (backend/gated_delta_rule_scratch.h, which the kernels allocate
  // by); the conv's and the gates' fp32 partials are smaller.
  int64_t deltanet_scratch = 0;
  for (const LayerSpec& l : s.layers) {
    if (!l.is_deltanet()) continue;
    DeltaRuleShape shape;
    shape.batch = mb;
    shape.seq = run.seq_len;
    shape.n_k_heads = l.deltanet.num_k_heads;
    shape.n_v_heads = l.deltanet.num_v_heads;
    shape.k_head_dim = l.deltanet.k_head_dim;
    shape.v_head_dim = l.deltanet.v_head_dim;
    deltanet_scratch = std::max(deltanet_scratch, delta_rule_scratch_bytes(shape, es));
  }
  g.layer_workspace = decoder_workspace_bytes(s, mb, run.seq_len, run.token_chunk, es) + std::max(attention_partials, deltanet_scratch);
  const int64_t chunk = std::min(head_chunk_rows(V), mb_tokens);
  g.head = chunk * head_logits_stride(V) * (4 + es) + mb_tokens * 4;
  const int64_t token_arrays = attention_chunk(s) > 0 ? 5 : 4;  // + chunked attention's ids (chunked_attention.h)
  // and the virtual batches of packed examples and of chunks: starts and lengths (backend/segment_batch.h)
  const int64_t segment_batches = (run.packed ? 1 : 0) + (attention_chunk(s) > 0 ? 1 : 0);
  g.batch_arrays = pass_seqs * run.seq_len * token_arrays * 4 + pass_seqs * 4 +
                   segment_batches * 2 * segment_batch_entries_bound(pass_seqs * run.seq_len) * 4;
  // Engine's RopeBuffers: its max_positions is the longer of the model's positions and the run's sequences.
  g.rope_tables = 0;
  for (const RopeSpec& r : s.rope_tables)
    g.rope_tables += 2 * std::max(s.max_position_embeddings, run.seq_len) * (r.rot_dim() / 2) * 4;
}

int64_t micro_batch_of(const ModelSpec& spec, const ParamLayout& layout, RunShape run, int64_t gpu_bytes);
int64_t recompute_layers_of(const ModelSpec& spec, const ParamLayout& layout, RunShape run, int64_t gpu_bytes);

// resolve_auto once the passes are known.
void resolve_pass_shape(const ModelSpec& spec, const ParamLayout& layout, RunShape& run, int64_t gpu_bytes,
                        bool auto_recompute) {
  if (run.micro_batch_size == 0) run.micro_batch_size = micro_batch_of(spec, layout, run, gpu_bytes);
  if (auto_recompute) run.recompute_layers = recompute_layers_of(spec, layout, run, gpu_bytes);
  run.recompute_layers = std::min(run.recompute_layers, spec.num_layers);
}

// The public functions below over the spec's layout, made once.
int64_t micro_batch_of(const ModelSpec& spec, const ParamLayout& layout, RunShape run, int64_t gpu_bytes) {
  run.micro_batch_size = 0;
  const int64_t fallback = resolve_micro_batch(run);
  if (gpu_bytes <= 0) return fallback;
  // MoE layers try 32 768 tokens first, with a workspace of up to a tenth of the GPU: twice the rows per expert GEMM
  // (Qwen3-30B-A3B, 10 layers, 64 x 4096 on the H200: 312.6 TFLOP/s against 302.0 at 16 384; docs/PERFORMANCE.md).
  // Otherwise 16 384 or 8 192 tokens, with a workspace of up to a twentieth.
  struct Candidate {
    int64_t tokens, gpu_share;
  };
  const bool moe = has_moe_layers(spec);
  for (const Candidate c : {Candidate{32768, 10}, Candidate{16384, 20}, Candidate{8192, 20}}) {
    if (c.tokens == 32768 && !moe) continue;
    run.micro_batch_size = std::max<int64_t>(c.tokens / std::max<int64_t>(run.seq_len, 1), 1);
    const int64_t seqs = resolve_micro_batch(run);
    if (seqs <= fallback) return fallback;
    if (plan_gpu(spec, layout, run).layer_workspace * c.gpu_share <= usable_gpu_bytes(gpu_bytes)) return seqs;
  }
  return fallback;
}

int64_t recompute_layers_of(const ModelSpec& spec, const ParamLayout& layout, RunShape run, int64_t gpu_bytes) {
  const int64_t L = spec.num_layers;
  if (gpu_bytes <= 0) return L;
  const int64_t usable = usable_gpu_bytes(gpu_bytes);
  for (int64_t r = 0; r < L; ++r) {
    run.recompute_layers = r;
    if (plan_gpu(spec, layout, run).total() <= usable) return r;
  }
  return L;
}

int64_t passes_of(const ModelSpec& spec, const ParamLayout& layout, RunShape run, int64_t gpu_bytes,
                  bool auto_recompute) {
  if (gpu_bytes <= 0) return 1;
  int64_t best = 1, fewest_recomputing = std::numeric_limits<int64_t>::max();
  for (const int64_t p : auto_pass_candidates(run)) {
    RunShape candidate = run;
    candidate.passes = p;
    resolve_pass_shape(spec, layout, candidate, gpu_bytes, auto_recompute);
    if (plan_gpu(spec, layout, candidate).total() > usable_gpu_bytes(gpu_bytes)) continue;
    if (candidate.recompute_layers < fewest_recomputing) {
      best = p;
      fewest_recomputing = candidate.recompute_layers;
    }
  }
  return best;
}

}  // namespace

double nvme_step_seconds(const HostPlan& host, double nvme_gbs) {
  return nvme_gbs > 0 ? static_cast<double>(host.nvme_step_bytes()) / (nvme_gbs * 1e9) : 0.0;
}

int64_t usable_gpu_bytes(int64_t gpu_bytes) {
  return static_cast<int64_t>(static_cast<double>(gpu_bytes) * 0.94) - (int64_t{1} << 30);
}

std::vector<int64_t> auto_pass_candidates(const RunShape& run) {
  std::vector<int64_t> counts = {1};
  for (int64_t p = 2; p <= run.batch_size; ++p)
    if (run.batch_size % p == 0 && run.batch_size / p * run.seq_len >= kAutoPassTokens) counts.push_back(p);
  return counts;
}

int64_t auto_micro_batch(const ModelSpec& spec, RunShape run, int64_t gpu_bytes) {
  return micro_batch_of(spec, make_param_layout(spec), run, gpu_bytes);
}

int64_t auto_recompute_layers(const ModelSpec& spec, RunShape run, int64_t gpu_bytes) {
  return recompute_layers_of(spec, make_param_layout(spec), run, gpu_bytes);
}

int64_t auto_passes(const ModelSpec& spec, RunShape run, int64_t gpu_bytes, bool auto_recompute) {
  return passes_of(spec, make_param_layout(spec), run, gpu_bytes, auto_recompute);
}

void resolve_auto(const ModelSpec& spec, RunShape& run, int64_t gpu_bytes, bool auto_recompute) {
  const RunShape given = run;
  const ParamLayout layout = make_param_layout(spec);
  const auto resolve = [&](CheckpointPlacement checkpoints) {
    run = given;
    run.checkpoints = checkpoints;
    run.cudnn_backward = run.cudnn_attention && gpu_bytes > 0;
    const auto resolve_shape = [&] {
      if (run.passes == 0) run.passes = passes_of(spec, layout, run, gpu_bytes, auto_recompute);
      resolve_pass_shape(spec, layout, run, gpu_bytes, auto_recompute);
    };
    resolve_shape();
    // cuDNN's backward in calls of half the sequences, then half again, before our backward (2.6x slower).
    for (int64_t n = resolve_micro_batch(run) / 2; run.cudnn_backward && n >= 1 &&
                                                   plan_gpu(spec, layout, run).total() > usable_gpu_bytes(gpu_bytes);
         n /= 2) {
      run = given;
      run.checkpoints = checkpoints;
      run.cudnn_backward = true;
      run.cudnn_call_batch = n;
      resolve_shape();
    }
    if (run.cudnn_backward && plan_gpu(spec, layout, run).total() > usable_gpu_bytes(gpu_bytes)) {
      run = given;
      run.checkpoints = checkpoints;
      run.cudnn_backward = false;
      resolve_shape();
    }
    return gpu_bytes <= 0 || plan_gpu(spec, layout, run).total() <= usable_gpu_bytes(gpu_bytes);
  };
  if (given.checkpoints != CheckpointPlacement::automatic) {
    resolve(given.checkpoints);
    return;
  }
  // Automatic: the checkpoints go to the host exactly when they do not fit the GPU and the plan then fits.
  if (resolve(CheckpointPlacement::gpu)) return;
  const RunShape on_gpu = run;
  if (!resolve(CheckpointPlacement::host)) run = on_gpu;
}

bool cudnn_attention_for(DType dtype, int64_t gpu_bytes, const RuntimeSwitches& switches) {
  return gpu_bytes > 0 && dtype == DType::bf16 && switches.attention != AttentionChoice::ours;
}

int64_t resolve_micro_batch(const RunShape& run) {
  MT_ASSERT(run.passes >= 1, "micro-batch of an unresolved pass count");
  const int64_t pass_seqs = run.batch_size / run.passes;
  if (run.micro_batch_size > 0) return std::min(run.micro_batch_size, pass_seqs);
  return std::clamp<int64_t>(kAutoMicroBatchTokens / std::max<int64_t>(run.seq_len, 1), 1, pass_seqs);
}

HostPlan plan_host(const ModelSpec& spec, DType stream_dtype, int ranks, OffloadMode offload) {
  const ParamLayout layout = make_param_layout(spec);
  HostPlan h;
  h.parameters = layout.total_numel;
  h.stream_copy = stream_dtype == DType::bf16 ? 2 : 0;
  h.offload = offload;
  if (kind_offloaded(offload, StateKind::master)) h.master = 0;
  if (kind_offloaded(offload, StateKind::exp_avg)) h.exp_avg = h.exp_avg_sq = 0;
  h.nvme_per_parameter = offloaded_kinds(offload) * 4;
  if (offload != OffloadMode::none) {
    const TierSettings one_path{offload, {"."}, "plan"};
    for (int q = 0; q < ranks; ++q) {
      const TierLayout t = make_tier_layout(layout, one_path, q, ranks);
      h.nvme_bytes += t.total_bytes();
      h.staging_bytes += StateTier::kStaging * t.largest_unit_bytes + StateTier::sync_elements(layout, ranks) * 4;
    }
  }
  h.store_bytes = h.parameters * h.bytes_per_parameter();
  h.rank_bytes.assign(static_cast<size_t>(ranks), 0);
  for (const Region& r : layout.regions)
    for (int q = 0; q < ranks; ++q)
      h.rank_bytes[static_cast<size_t>(q)] += HostStore::slice_of(r.numel, q, ranks).size() * h.bytes_per_parameter();
  return h;
}

GpuPlan plan_gpu(const ModelSpec& spec, const RunShape& run) { return plan_gpu(spec, make_param_layout(spec), run); }

GpuPlan plan_gpu(const ModelSpec& spec, const ParamLayout& layout, const RunShape& run) {
  const auto es = static_cast<int64_t>(dtype_size(run.dtype));
  GpuPlan g;
  // The CUDA pipeline's slots and staging (of the largest streamed region) and its gradient sink's buffers (an own
  // one each for the embedding and the head, two of the largest layer's size for the layers, allocated on first
  // use: in one pass a resident region accumulates in place and takes none).
  const auto regions = static_cast<int64_t>(layout.regions.size());
  const int64_t resident = std::clamp<int64_t>(run.resident_regions, 0, regions);
  int64_t streamed = 0;
  for (int64_t r = resident; r < regions; ++r) streamed = std::max(streamed, layout.regions[static_cast<size_t>(r)].numel);
  g.weight_slots = run.weight_slots * streamed * es;
  if (run.dtype == DType::bf16 && run.stream_dtype == DType::f32) g.weight_slots += streamed * 4;  // fp32 staging
  const auto buffered = [&](int64_t r) { return run.passes > 1 || r >= resident; };
  g.grad_buffers = ((buffered(0) ? layout.embedding().numel : 0) + (buffered(regions - 1) ? layout.head_region().numel : 0) +
                    (buffered(regions - 2) ? 2 * layout.largest_layer_numel : 0)) * 4 +
                   (run.passes > 1 ? kGradientAddChunk : 0);
  plan_activations(spec, run, es, g);
  g.gemm_workspace = gemm_workspace_bytes(
      most_experts(spec), run.runtime.moe_gemm == MoeGemmChoice::cutlass && run.dtype == DType::bf16);
  return g;
}

MemoryPlan plan_memory(const ModelSpec& spec, const RunShape& run) {
  MemoryPlan m{plan_host(spec, run.stream_dtype, run.ranks, run.offload), plan_gpu(spec, run)};
  m.host.checkpoint_bytes = m.gpu.host_checkpoints;
  return m;
}

int64_t cpu_backend_host_bytes(const ModelSpec& spec, const RunShape& run) {
  const ParamLayout layout = make_param_layout(spec);
  GpuPlan g;
  plan_activations(spec, run, 4, g);  // the CPU reference computes in fp32
  // BasicGradientSink: embedding, head and a decoder-layer accumulator per region size (lazily, of the largest).
  const int64_t grads = (layout.embedding().numel + layout.head_region().numel + layout.largest_layer_numel) * 4;
  return plan_host(spec, run.stream_dtype, run.ranks, run.offload).ram_bytes() + grads + g.checkpoints +
         g.host_checkpoints + g.segment +
         g.saved_layers + g.moe_kept + g.layer_workspace + g.head + g.batch_arrays + g.rope_tables;
}

}  // namespace mt
