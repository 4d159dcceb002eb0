// What cuDNN's fused attention (kernels/attention/cudnn_attention.h) takes on the GPU, and which implementation runs each
// direction, as pure functions of the shape and the run's switches (CudnnAttentionPlan holds the attention ones of
// core/runtime_switches.h): the one source the CUDA backend and the memory plan both read, so that what the plan
// reserves is what the backend allows itself. No cuDNN and no environment here.
// Invariants: CudnnAttentionPlan::workspace holds what CudnnAttention::forward / backward take (the graph's workspace
// as cudnn-frontend reports it, its fp32 side tensors inside, never above the formula: the op table checks it on the
// GPU; the bucket staging copies byte for byte; each rounded up to 256 B); the backward counted is the one training runs (deterministic_backward(): the deterministic
// graph unless the switches say otherwise); forward's graph takes no workspace.
#pragma once
#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "core/dtype.h"
#include "core/runtime_switches.h"
#include "model/layer_spec.h"
#include "plan/memory_plan.h"

namespace mt {

// Why cuDNN does not cover a shape (empty when it does): packed segments without their virtual batch (segment_batch:
// the engine sets it), fp32, head_dim (a multiple of 8 up to 256), a value head dim that is not a multiple of 8 up to
// the q/k one (latent attention's 128 with 192 is covered: V, O and their gradients at their own width), seq < 2. ALiBi is covered (the slopes' bias in
// the graph, as cudnn-frontend's alibi_mask). A soft-cap is covered (the graph's score
// modifier), and so are attention sinks (GPT-OSS: the forward's softmax takes the sink as cudnn-frontend lowers it;
// the backward is the same graph, lse holding the sink, and d_sinks stays Backend::attention_sinks_backward's); what
// the loaded cuDNN's version refuses is cudnn_version_gap's, what cudnn-frontend 1.32 refuses cudnn_frontend_gap's.
std::string cudnn_attention_gap(const AttnShape& s, DType dtype);
// The same for a model's attention layer in a run of `dtype` (before any batch: packed segments and chunked
// attention's chunks are the batch's, and run as their virtual batch); v_head_dim 0: the q/k head dim.
std::string cudnn_layer_gap(const AttentionSpec& a, DType dtype, int64_t v_head_dim = 0);
// Why a cuDNN of `version` (cudnnGetVersion(): 91400 is 9.14.0) builds no graph of one direction for a shape that
// cudnn_attention_gap covers (empty when it builds one): 9.10.0 and 9.10.1 (SDPA bf16 bugs; cudnn-frontend refuses
// them), a soft-cap before 9.6 (the score modifier), a forward with sinks before 9.13 (the SDPA sink pattern; the
// backward takes sinks at any version). The graph is refused when it is built, and our kernel runs.
std::string cudnn_version_gap(const AttnShape& s, bool backward, int64_t version);
// Why cudnn-frontend 1.32, which builds the graphs, builds no graph of one direction for a shape that the two above
// let through (empty when it builds one); s is the graph's shape (seq: its key length, a staged call's bucket) and
// ragged whether the graph is. On cuDNN 9.15 and older the frontend adds a full-length padding mask of its own to a
// backward whose key length is not a multiple of 128 unless the graph is ragged, and refuses that mask beside a score
// modifier, which a soft-cap or ALiBi is here (with the masks, padding included, inside it: so a padded graph is
// refused as well). Refused when the graph is built; our kernel runs that backward.
std::string cudnn_frontend_gap(const AttnShape& s, bool backward, bool ragged, int64_t version);

inline constexpr int64_t kCudnnGraphUnit = 256;     // what every graph's plan takes beyond its tensors (below)
inline constexpr int64_t kCudnnBackwardTile = 8192;  // RuntimeSwitches::cudnn_backward_tile's default
inline constexpr float kCudnnPadLse = 1e30f;         // the lse of a tile's padded query rows (backward_tile)

// What the tiled backward holds beside its graphs' plan workspace at tile T: the fp32 lse of a tile,
// the tile's bf16 q, o, dO, k, v and their dq, dk, dv, the fp32 dQ accumulator of a row of tiles, the fp32 dK and
// dV of the whole sequence (rounded up to tiles), and a padded call's per-sequence query and key lengths in a tile.
int64_t cudnn_tiled_side_bytes(const AttnShape& s, int64_t T);
// The gathered copies of a call of v's sequences at v's own length (a bucket: nothing else is staged).
int64_t cudnn_segment_staging_bytes(bool backward, const AttnShape& v);

// The workspace one call of each direction makes CudnnAttention hold (graph + staging; forward's graph takes none;
// the backward's at its first, largest call under limit_bytes, CudnnAttentionPlan::backward_batch).
struct CudnnWorkspace {
  int64_t forward = 0, backward = 0;
};

// Which implementation runs one direction of one call: ours, or cuDNN (the backward: the plan's
// deterministic_backward graph), and why in a few words for the log.
struct AttentionDecision {
  bool cudnn = false;
  std::string why;
};

// cuDNN attention under one run's switches (RuntimeSwitches: attention, cudnn_seq_buckets, cudnn_ragged,
// attention_deterministic, cudnn_backward_tile, cudnn_workspace_mib; their variables and config keys are
// core/runtime_switches.h's): every figure and choice that depends on them.
class CudnnAttentionPlan {
 public:
  explicit CudnnAttentionPlan(const RuntimeSwitches& switches) : switches_(switches) {}

  // ours (kernels/attention/attention.cu always), cudnn (cuDNN wherever it covers the case, whatever its workspace), auto (the
  // default: per direction, from the H200 measurements in docs/PERFORMANCE.md: forward cuDNN wherever covered;
  // backward cuDNN's graph (deterministic_backward) where its workspace fits what the memory plan reserved, else ours).
  AttentionChoice choice() const { return switches_.attention; }

  // The sequence length whose graph a batch of seq-long sequences runs: seq rounded up to a multiple of
  // max(64, 2^floor(log2 seq) / 8), so that a run whose batches vary in length compiles a few graphs, not one per
  // length (at most 12.5 % more rows, all masked). cudnn_seq_buckets off: seq itself.
  int64_t seq_bucket(int64_t seq) const;

  // cudnn_ragged on (the default): the forward of a padded or staged batch, and of a packed call's segment groups,
  // runs as one ragged call (each sequence read and written in place at its offset: no staging or gathers, and padded
  // query rows cost nothing) where cuDNN finalizes the ragged graph; so does the backward, deterministic or not, of a
  // staged batch and of a packed call's untiled groups up to head_dim 128 (the lse alone gathered; the
  // non-deterministic one's fp32 dQ accumulator over the call's rows at dQ's offsets). Off: the padded graphs with
  // their staging copies and gathers. The memory plan counts the padded graphs' figures, which hold either.
  bool ragged() const { return switches_.cudnn_ragged; }

  // attention_deterministic on (the default): cuDNN's backward is its deterministic graph (dQ = dS·K from a dP
  // workspace: a step's bits are the same run to run). Off: its non-deterministic graph, which adds dQ into an fp32
  // buffer by atomics whose order varies (a step's bits change from run to run, so bitwise resume and the -np
  // agreement no longer hold) and whose workspace is linear in the sequence, so it never tiles: 10-20 % faster alone,
  // 5.6 % off Qwen2.5-3B's 2 × 32768 step and nothing at 8 × 8192 (docs/PERFORMANCE.md). Our kernel's backward is
  // deterministic either way.
  bool deterministic_backward() const { return switches_.attention_deterministic; }
  // "deterministic backward", or the non-deterministic one's name with its switch: for the log and the plan's lines.
  const char* backward_name() const;

  // Bytes of the backward graph at a bucket shape (batch, seq = the bucket, heads, head_dim): cudnn-frontend's plan
  // workspace, which holds its fp32 side tensors. The deterministic: the bf16 dP matrix b·h·⌈s⌉₆₄·⌈s⌉₁₂₈·2 (the
  // dP-workspace kernel cudnn-frontend forces for the deterministic algorithm), the fp32 dQ b·h·⌈s⌉₆₄·d·4 and the
  // fp32 softmax sum b·h·s·4. Measured on the H200 (cuDNN 9.14, with the hand-built graphs of the time: the same
  // engines, their softmax sum ours; the H100's op table found the frontend's workspace never above the formula):
  // 8450 MiB at 4×8192 16/2 hd128, 33026 MiB at 1×32768, 4.0 MiB at 1×256, 1.0 MiB at 1×256 4/2 padded, 4.4 MiB at
  // 2×320 4/2 hd256 padded; the formula gives each. Every graph's plan also takes kCudnnGraphUnit more than its
  // tensors (the forward's whole workspace; the op table found each backward 256 B above the tensors' sum). The
  // non-deterministic: b·h·⌈s⌉₆₄·d·4, the fp32 dQ accumulator b·h·s·d·4 and the softmax sum (514 MiB at 4×8192 and
  // at 1×32768 16/2 hd128).
  int64_t backward_graph_bytes(int64_t batch, int64_t bucket_seq, int64_t n_heads, int64_t head_dim) const;

  // The deterministic backward in tiles (the non-deterministic one never tiles): past cudnn_backward_tile tokens
  // (default kCudnnBackwardTile; 0: never) a causal, windowless call without ALiBi runs as square tiles of the
  // sequence — the diagonal tiles causal, those below it unmasked, those above skipped — each through one tile-long
  // graph whose workspace is the tile's, not the sequence's.
  // Each tile's rows are gathered into tile buffers (the last tile's rows past the sequence 0), so that no call is
  // staged and the two graphs serve every length; the tiles' bf16 dQ, dK, dV are summed in a fixed order into fp32
  // accumulators (dQ one row of tiles at a time, dK and dV over the whole sequence): deterministic, and the workspace
  // O(tile² + sequence). Padded query rows (seq_lens, the last tile's) get kCudnnPadLse as their lse, so their
  // probabilities are 0; causality keeps every real row off the padded columns. A padded call's tiles are padded
  // graphs given each sequence's rows within the tile, so that its padded rows cost (almost) nothing. Returns the
  // tile, or 0 where the call runs as one graph.
  int64_t backward_tile(const AttnShape& s) const;
  // The tiled backward's whole workspace: the tile graph's plan as backward_graph_bytes counts it, then
  // cudnn_tiled_side_bytes. Nothing is staged.
  int64_t tiled_backward_bytes(const AttnShape& s, int64_t T) const;

  // The backward runs a batch in calls of backward_batch(s, limit) sequences, the last call the rest: the whole batch
  // where limit_bytes < 0 (no plan: the op tests, the probe, attention cudnn) or its call fits, else as many as keep a
  // call's workspace within the limit (the memory plan's reserve, or cudnn_workspace_mib), and at least one. Each
  // sequence's gradients are computed apart from the others', so the calls give the bits one call would; fewer
  // sequences a call run slower (the H200, 8 × 4096, 32/4 heads: 387–395 TFLOP/s a sequence a call, 438 three,
  // 449–454 eight), so the memory plan splits them only to keep optimizer state on the GPU (plan/resident_plan.h).
  // backward_call_bytes: a call of n of s's sequences as the reserve counts it (the tiled graph's workspace where s
  // tiles, else one graph at s's bucket staged as if one token short of it; nothing staged with the buckets off).
  int64_t backward_call_bytes(const AttnShape& s, int64_t n) const;
  int64_t backward_batch(const AttnShape& s, int64_t limit_bytes) const;
  // The shape of the call that starts at sequence b0 (at most backward_batch(s, limit_bytes) sequences; seq_lens
  // offset).
  AttnShape backward_call(const AttnShape& s, int64_t b0, int64_t limit_bytes) const;

  // The staging copies of a call whose length is not its bucket's (else 0): forward q, o, k, v, lse and lengths at
  // the bucket length; backward q, o, dO, dQ, k, v, dK, dV, lse and lengths.
  int64_t staging_bytes(bool backward, const AttnShape& s) const;

  // Packed segments (AttnShape::segment_batch, backend/segment_batch.h) run as their virtual batch: each group a
  // padded batch of its sequences at the bucket of its class's bound, or of the call's length where that is shorter
  // (segment_group_shape: one graph length per class, whatever the batch), in calls whose rows (q, k, v, out and lse;
  // backward also dO and the gradients) are gathered from the packed call into the workspace past the call's graph,
  // and the results scattered back. The CPU builds the layout, so no call waits on the GPU. Group g's virtual batch:
  // seq_lens its lengths, no segments, the call's window (which masks nothing where it reaches the virtual length).
  AttnShape segment_group_shape(const AttnShape& s, const SegmentGroup& g) const;
  // What a call of n of v's sequences holds: its graph (forward: kCudnnGraphUnit; backward: backward_graph_bytes, in
  // tiles past the tile) and the gathered copies.
  int64_t segment_call_bytes(bool backward, const AttnShape& v, int64_t n) const;
  // The sequences a call of v takes: all where limit_bytes < 0 or they fit, else as many as fit, at least one. A
  // sequence of a group is never longer than the bucket of the call's length, so one fits the memory plan's reserve
  // wherever the reserve holds a call of one unsegmented sequence; past the tile it does where the plan was made for
  // packed batches (reserve), else our kernel runs the call.
  int64_t segment_call_batch(bool backward, const AttnShape& v, int64_t limit_bytes) const;

  // The workspace one call of each direction holds (the backward's first call under limit_bytes).
  CudnnWorkspace workspace(const AttnShape& s, int64_t limit_bytes = -1) const;
  // The most that calls of any length up to longest.seq make it hold (a batch is as long as its longest sequence, so
  // lengths vary), its backward in calls of call_batch sequences (0: the whole batch) at the longest length: the
  // graph of longest's bucket and its staging, as if staged (one token short of a bucket is); where longest tiles,
  // the backward's figure is the larger of its tiles' and one graph at the tile's length. Held to it as its limit, a
  // shorter batch's calls take as many sequences as fit. What the memory plan reserves.
  // packed: the batches may carry packed segments (data.packing, bench --pack): the figure also holds a call of one
  // segment as long as the sequence (past the tile, its gathered rows beside the tiled graph).
  CudnnWorkspace reserve(const AttnShape& longest, int64_t call_batch = 0, bool packed = false) const;

  // The workspace limit a run's calls are held to: cudnn_workspace_mib where set (an override, MiB), else with `auto`
  // the memory plan's figure (planned_bytes; -1 where no plan set one, as in the op tests and the probe), else
  // (cudnn, ours) none: -1.
  int64_t workspace_limit(int64_t planned_bytes) const;

  // gap: cudnn_attention_gap of the call; workspace_bytes: what the call would hold (workspace, or the plan cuDNN
  // built plus its staging); limit_bytes: workspace_limit (-1: none).
  AttentionDecision choose(bool backward, const std::string& gap, int64_t workspace_bytes, int64_t limit_bytes) const;
  // One line for the log: what the choice runs in each direction, with the limit.
  std::string describe_choice(int64_t limit_bytes) const;

  // One line for preflight and calc-resource: what the plan reserved for cuDNN attention and which backward it
  // assumes (ours where cuDNN's backward workspace does not fit, with the figure it would need).
  std::string describe_plan(const GpuPlan& g) const;

 private:
  RuntimeSwitches switches_;
};

}  // namespace mt
