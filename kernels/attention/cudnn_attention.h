// cuDNN's fused flash attention (the runtime fusion engine's SDPA patterns) as cudnn-frontend's graphs, for the
// AttnShape cases it covers: bf16, causal, GQA/MQA, sliding window, right padding (per-sequence lengths), any scale,
// logit soft-cap (Gemma 2, as a score modifier: cuDNN 9.6 and later), attention sinks (GPT-OSS: in the forward's
// softmax, cuDNN 9.13 and later, cast per call into an fp32 copy as cuDNN takes them; the backward is the graph without
// them, lse holding the sink), ALiBi (Baichuan 2: slope_h · (col − row) added after the soft-cap; its backward never
// tiles), head_dim a multiple of 8 up to 256, a value head dim of its own (latent attention: 128 where q/k have 192;
// V, O and their gradients are rows of n_heads or n_kv_heads × value_head_dim(); never ragged), packed segments and chunked attention's chunks as their virtual batch
// (AttnShape::segment_batch: each group's calls gathered from the packed rows into the workspace past the call's graph,
// run as a padded batch, scattered back; with cudnn_ragged the forward's calls and the backward's untiled ones
// ragged); what cuDNN or cudnn-frontend 1.32 refuses (plan/cudnn_attention_plan.h's cudnn_version_gap and
// cudnn_frontend_gap) runs our kernel. Invariants: q/k/v/out and their gradients are read and written in place as token-major rows (BSHD
// strides) when the sequence length is a bucket length (cudnn_seq_bucket), else staged through a bucket-long copy (pad
// rows 0, masked); with cudnn_ragged the forward of a padded or staged batch, or of a packed call's segment group, and
// the backward (deterministic or not) of a staged batch or an untiled segment group (head_dim <= 128), is one ragged
// call where cuDNN finalizes it (each sequence read and written in place at its offset, its padded rows neither
// computed nor written); lse is ours ([batch, n_heads, seq], natural log of the final logits, 0 on padded rows), which
// is cuDNN's softmax stats, so a forward of one implementation pairs with a backward of the other; padded rows of every
// output are 0; the backward graph is the deterministic one (no fp32 dQ accumulation by atomics) unless
// MEGATRAIN_ATTENTION_DETERMINISTIC=0 (cudnn_deterministic_backward: the non-deterministic one, never tiled), run over
// the batch in calls of as many sequences as the workspace limit holds (cudnn_backward_batch: the same bits as one
// call), past cudnn_backward_tile's length run as tiles of one tile-long graph (a causal one on the diagonal, an
// unmasked one below it) summed in a fixed order, so its workspace does not grow with the square of the sequence. One
// graph and plan per bucket (or tile) shape, built on first use and kept; the workspace grows through the backend's
// allocator and never shrinks, so a step at a shape seen before allocates nothing. Which direction runs here, and the
// workspace a run allows, are plan/cudnn_attention_plan.h's (the memory plan reserves the same figure); this class only
// reports what a plan needs.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "plan/cudnn_attention_plan.h"

namespace mt::cuda {

// One info line: what the plan's attention switch runs in each direction under this workspace limit (-1: none).
void log_attention_choice(const CudnnAttentionPlan& plan, int64_t limit_bytes);

// An engine config: cuDNN's engine (CUDNN_ATTR_ENGINE_GLOBAL_INDEX) with knob choices (cudnnBackendKnobType_t, value).
struct CudnnKnob {
  int64_t type = 0, value = 0;
};
struct CudnnEngineConfig {
  int64_t engine = -1;
  std::vector<CudnnKnob> knobs;
  bool nondeterministic = false;  // the frontend deselects it where determinism is asked
  std::string describe() const;   // "TILE_M=128,STAGES=2" (knobs by their cuDNN names)
};

// What building one graph gave: whether it finalized, the engine, its workspace, or the first failing call.
struct CudnnPlanInfo {
  bool ok = false;
  int64_t engine = -1;          // CUDNN_ATTR_ENGINE_GLOBAL_INDEX of the chosen engine config
  int64_t workspace_bytes = 0;  // the plan's workspace (the frontend's side tensors inside it), 256-aligned
  int64_t candidates = 0;       // engine configs the heuristics offered
  std::string offered;          // their engines' global indices up to the chosen one, in order ("n": non-deterministic)
  std::string knobs;            // the chosen config's knob choices (CudnnEngineConfig::describe)
  std::string notes;            // the frontend's name of the chosen plan
  double build_ms = 0;          // graph, heuristics and plan (cuDNN compiles the kernels here)
  std::string error;            // when !ok: the frontend's failing step and message, or the gap that refused it
};

class CudnnAttention {
 public:
  using Alloc = std::function<void*(int64_t bytes)>;
  using Free = std::function<void(void*)>;
  // switches: the run's (core/runtime_switches.h); their attention ones decide buckets, ragged calls, the backward
  // graph, its tiles and the choice (plan()).
  CudnnAttention(cudaStream_t stream, Alloc alloc, Free release, const RuntimeSwitches& switches);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // cudnnGetVersion() of the loaded library, or 0 where cudnnCreate failed (then every plan fails with why).
  int64_t version();

  // Run when the plan for the shape finalizes (else return false, having run nothing). Pointers as in
  // Backend::attention_forward / attention_backward; the shape's device pointers (seq_lens) are read on the GPU.
  // Packed segments run in calls of cudnn_segment_call_batch(false, group, limit_bytes) sequences (-1: a group a call).
  bool forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
               const AttnShape& s, int64_t limit_bytes = -1);
  // The backward (cudnn_deterministic_backward's graph) runs in calls of cudnn_backward_batch(s, limit_bytes) sequences
  // (-1: one call); packed segments, of cudnn_segment_call_batch(true, group, limit_bytes).
  bool backward(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv, const __nv_bfloat16* dout,
                const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, const __nv_bfloat16* out,
                const float* lse, const AttnShape& s, int64_t limit_bytes = -1);

  // Builds (or finds) the plan for the shape and says how it went; the probe (bench-attention) prints it.
  CudnnPlanInfo plan_info(bool backward, const AttnShape& s, bool deterministic = true);
  // The probe's engine survey, on the shape's graph (built on first use): every engine config the heuristics offer
  // (modes A and FALLBACK, in order), then the one-knob variations of the first that determinism allows.
  std::vector<CudnnEngineConfig> engine_configs(bool backward, const AttnShape& s, bool deterministic);
  // Replaces the shape's plan by one of config c (the next calls run it); false, the plan kept, where it does not
  // finalize. The survey's timing of each config; training runs the heuristics' choice.
  bool use_engine_config(bool backward, const AttnShape& s, bool deterministic, const CudnnEngineConfig& c);
  // The workspace a call of the shape holds (the plan's, with the frontend's side tensors, and the bucket staging:
  // cudnn_attention_workspace's terms as this cuDNN reports them), or -1 where the plan does not finalize. Builds the
  // plan on first use; the backward, its first (largest) call of cudnn_backward_batch(s, limit_bytes)
  // sequences, having built the last call's too (-1 where either does not finalize).
  int64_t workspace_need(bool backward, const AttnShape& s, int64_t limit_bytes = -1);
  // Whether this call runs here: choose_attention over the shape's gap, workspace_need and limit_bytes (-1: none);
  // a refusal is logged once per direction, shape and limit, a plan that did not finalize when it was built.
  bool chooses(bool backward, const AttnShape& s, int64_t limit_bytes);
  // The figures and choices under this instance's switches (plan/cudnn_attention_plan.h).
  const CudnnAttentionPlan& plan() const { return plan_; }

  struct Graph;  // one finalized (or refused) graph: the frontend's graph and plan, its own device memory

 private:
  // direction, batch, seq, heads, kv heads, head_dim, value head dim, window, scale bits, soft-cap bits, padded,
  // causal (false: a tile below the diagonal of the tiled backward, unmasked), sinks (the forward's; the backward's
  // graph has none), ALiBi, ragged
  using Key = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, uint32_t, uint32_t, bool,
                         bool, bool, bool, bool>;
  // A shape's graph: its sequence length rounded up to a bucket (cudnn_seq_bucket), padded when it has seq_lens or
  // was rounded up (staged: copied into the bucket's layout and back).
  struct Layout {
    AttnShape shape;
    bool padded, staged;
  };
  Layout layout_for(const AttnShape& s) const;
  // ragged: sequences that start at per-sequence offsets (ragged_forward, ragged_backward); padded must be set. A
  // ragged non-deterministic backward's fp32 dQ accumulator has dQ's rows and offsets (the call's rows, not the
  // graph's).
  Graph& graph(bool backward, const AttnShape& s, bool padded, bool deterministic, bool causal = true,
               bool ragged = false);
  // The forward as one ragged call of the graph shape g_shape (its seq a bucket) over a call of rows_in_call rows:
  // sequence i starts at row starts[i] with lens[i] tokens (ragged_offsets: starts nullptr, at row i·seq), its
  // offsets and lengths in the graph's own device ints; stats [batch, heads, seq] of g_shape. Rows past a
  // sequence's length are neither read nor written. Called where ragged_forward_bytes found the graph.
  void ragged_forward(__nv_bfloat16* out, float* stats, const __nv_bfloat16* q, const __nv_bfloat16* k,
                      const __nv_bfloat16* v, const AttnShape& g_shape, const int32_t* starts, const int32_t* lens,
                      int64_t seq, int64_t rows_in_call);
  // The tiled backward's two graphs (diagonal, below) at tile length T, and the workspace they and the side tensors
  // take (plan/cudnn_attention_plan.h: cudnn_tiled_backward_bytes' terms as this cuDNN reports them), or -1 where
  // either does not finalize.
  struct TileGraphs {
    Graph *diagonal, *below;
    int64_t workspace_bytes;
  };
  TileGraphs tile_graphs(const AttnShape& s, int64_t T);
  // The forward through the bucket's graph (padded where the batch has lengths or is staged): in place where the
  // sequence is a bucket length, else staged through bucket-long copies.
  bool bucket_forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* q, const __nv_bfloat16* k,
                      const __nv_bfloat16* v, const AttnShape& s);
  // What a ragged forward at graph shape g_shape holds in the shared workspace (with stats_here the stats [batch,
  // heads, seq] of g_shape at its start; the graph holds its own plan workspace), or -1 where it does not run:
  // MEGATRAIN_CUDNN_RAGGED=0, offsets of rows_in_call rows past int32, or a graph that does not finalize.
  int64_t ragged_forward_bytes(const AttnShape& g_shape, int64_t rows_in_call, bool stats_here);
  // A padded or staged batch's forward as one ragged call (shape s, graph shape bucket); false, having run nothing,
  // where the ragged graph does not finalize or its offsets pass int32.
  bool ragged_batch_forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* q, const __nv_bfloat16* k,
                            const __nv_bfloat16* v, const AttnShape& s, const AttnShape& bucket);
  // The ragged backward's graph at g_shape: cudnn_deterministic_backward's, deterministic or not.
  Graph& ragged_backward_graph(const AttnShape& g_shape);
  // What a ragged backward at graph shape g_shape holds in the shared workspace (its plan's workspace, which holds the
  // frontend's side tensors, then the stats [batch, heads, seq] of g_shape: ragged_backward_stats), or -1 where it
  // does not run: MEGATRAIN_CUDNN_RAGGED=0, a tiled shape, head_dim past 128 (cuDNN 9.14's ragged backward is wrong
  // there), offsets of rows_in_call rows past int32, or a graph that does not finalize.
  int64_t ragged_backward_bytes(const AttnShape& g_shape, int64_t rows_in_call);
  // Where the caller places the stats in the workspace.
  float* ragged_backward_stats(const AttnShape& g_shape);
  // The backward as one ragged call, sequences placed as ragged_forward's; the stats already at
  // ragged_backward_stats. The gradients' rows past a sequence's length are not written. Called where
  // ragged_backward_bytes found the graph and the workspace holds it.
  void ragged_backward(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv, const __nv_bfloat16* dout,
                       const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, const __nv_bfloat16* out,
                       const AttnShape& g_shape, const int32_t* starts, const int32_t* lens, int64_t seq,
                       int64_t rows_in_call);
  // A staged batch's backward as one ragged call (shape s, graph shape bucket); false, having run nothing, where
  // ragged_backward_bytes refuses it or its workspace cannot be allocated.
  bool ragged_batch_backward(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv, const __nv_bfloat16* dout,
                             const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                             const __nv_bfloat16* out, const float* lse, const AttnShape& s, const AttnShape& bucket);
  // One call's workspace_need and backward: a batch that cudnn_backward_batch does not split.
  int64_t call_workspace_need(bool backward, const AttnShape& s);
  bool backward_call(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv, const __nv_bfloat16* dout,
                     const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, const __nv_bfloat16* out,
                     const float* lse, const AttnShape& s);
  bool tiled_backward(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv, const __nv_bfloat16* dout,
                      const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, const __nv_bfloat16* out,
                      const float* lse, const AttnShape& s, int64_t T);
  // Grows the workspace to g's plus the staging; false (and g is dropped) when that cannot be allocated.
  bool reserve_workspace(Graph& g, int64_t staging_bytes);
  bool reserve_bytes(Graph& g, int64_t bytes);  // the same for a total

  // Packed segments: every group's calls in order (plan/cudnn_attention_plan.h: cudnn_segment_group_shape, calls of
  // cudnn_segment_call_batch sequences), each its virtual shape, where its entries of starts begin, and what it holds
  // as one ragged call (-1: it gathers). A call runs ragged where its ragged graph finalizes and holds no more than
  // the most the plan's formula counts for any of the calls (cudnn_segment_call_bytes): a ragged non-deterministic
  // backward's dQ accumulator spans the packed call's rows, which a short group's gathered copies may not, and the
  // workspace never outgrows what the memory plan reserved.
  struct SegmentCall {
    AttnShape shape;
    const int32_t* starts;
    int64_t ragged_bytes = -1;
  };
  std::vector<SegmentCall> segment_calls(bool backward, const AttnShape& s, int64_t limit_bytes);
  // Where a call's gathered rows begin in the workspace: past what its graph takes (-1: the graph did not finalize).
  int64_t segment_graph_bytes(bool backward, const AttnShape& call);
  // The most any of the calls holds (its ragged call, or its graph and gathered rows), or -1 where a graph does not
  // finalize.
  int64_t segment_workspace_need(bool backward, const std::vector<SegmentCall>& calls);
  // segment_calls with every call's graph built and the workspace grown to the largest before anything runs, so that a
  // refusal comes before anything is written and no call moves the workspace under another's gathered rows; nullopt,
  // having run nothing, where a graph does not finalize or the workspace cannot be allocated.
  std::optional<std::vector<SegmentCall>> reserved_segment_calls(bool backward, const AttnShape& s,
                                                                 int64_t limit_bytes);
  bool segment_forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* q, const __nv_bfloat16* k,
                       const __nv_bfloat16* v, const AttnShape& s, int64_t limit_bytes);
  bool segment_backward(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv, const __nv_bfloat16* dout,
                        const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                        const __nv_bfloat16* out, const float* lse, const AttnShape& s, int64_t limit_bytes);

  const CudnnAttentionPlan plan_;
  cudaStream_t stream_;
  Alloc alloc_;
  Free free_;
  void* handle_ = nullptr;  // cudnnHandle_t, created on first use
  bool handle_tried_ = false;
  std::string handle_error_;
  std::vector<std::unique_ptr<Graph>> graphs_;  // a few shapes per run: found by a linear search
  std::set<std::tuple<bool, int64_t, int64_t, int64_t>> refusals_logged_;  // backward, batch, seq, limit
  void* workspace_ = nullptr;
  int64_t workspace_bytes_ = 0;
};

// dst [groups, rows, row_bytes] = src [groups, src_rows, row_bytes] rows [row0, row0 + rows), those past src_rows 0
// (row_bytes a multiple of 4): the tiled backward's gathers of a tile's rows.
void gather_rows(void* dst, const void* src, int64_t groups, int64_t src_rows, int64_t row0, int64_t rows,
                 int64_t row_bytes, cudaStream_t stream);
// gather_rows of rows [0, to_rows): stages a batch into a longer (or back from a longer) sequence layout.
void restride_rows(void* dst, const void* src, int64_t groups, int64_t from_rows, int64_t to_rows, int64_t row_bytes,
                   cudaStream_t stream);
void fill_ints(int32_t* dst, int64_t n, int32_t value, cudaStream_t stream);  // dst[0, n) = value
// The padded tiled backward's lengths of a tile of `rows` rows starting at row0: dst[i] = clamp(lens[i] − row0, 1,
// rows), i < n. A sequence with no rows in the tile keeps one: a padded row, whose lse (kCudnnPadLse) makes its
// probabilities 0, so that it adds nothing (cuDNN is not given a length of 0).
void tile_lengths(int32_t* dst, const int32_t* lens, int64_t n, int64_t row0, int64_t rows, cudaStream_t stream);
// The ragged forward's offsets (elements) and lengths for n sequences: sequence i starts at row starts[i] of the
// call's rows with lens[i] tokens (starts nullptr: at row i·seq with min(lens[i], seq), or seq where lens is nullptr;
// a filler, starts[i] < 0: at end_row with 0 tokens); q_offsets / kv_offsets [n + 1] = row · q_width / kv_width, the
// last entry end_row's; lens_out [n]. end_row · width must fit int32.
void ragged_offsets(int32_t* q_offsets, int32_t* kv_offsets, int32_t* lens_out, const int32_t* starts,
                    const int32_t* lens, int64_t n, int64_t seq, int64_t q_width, int64_t kv_width, int64_t end_row,
                    cudaStream_t stream);

// The tiled backward's sums (cudnn_attention_rows.cu), over groups of rows × width elements, each group at its
// stride (elements): acc (=, or +=) x; dst = bf16(src) rounded to nearest.
void accumulate_rows(float* acc, int64_t acc_stride, const __nv_bfloat16* x, int64_t x_stride, int64_t groups,
                     int64_t rows, int64_t width, bool assign, cudaStream_t stream);
void store_rows(__nv_bfloat16* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t groups,
                int64_t rows, int64_t width, cudaStream_t stream);
// lse_dst [batch, heads, rows] = lse [batch, heads, seq] rows [row0, row0 + rows), kCudnnPadLse at or past the
// sequence's valid length (min(lens[b], seq); lens nullptr: seq): the tiled backward's lse of a row of tiles.
void gather_lse(float* lse_dst, const float* lse, int64_t batch, int64_t heads, int64_t seq, int64_t row0,
                int64_t rows, const int32_t* lens, cudaStream_t stream);

// A virtual batch of packed segments (backend/segment_batch.h; starts and lens its n entries): dst [n, seq, row] =
// the packed call's rows starts[b] + i for i < lens[b] (starts[b] >= 0), else 0; scatter_segment_rows writes those
// rows of dst from src [n, seq, row] and leaves the rest. The lse versions map [n, heads, seq] against the packed
// call's [batch, heads, call_seq] the same way (gathered padding 0).
void gather_segment_rows(void* dst, const void* src, const int32_t* starts, const int32_t* lens, int64_t n,
                         int64_t seq, int64_t row_bytes, cudaStream_t stream);
void scatter_segment_rows(void* dst, const void* src, const int32_t* starts, const int32_t* lens, int64_t n,
                          int64_t seq, int64_t row_bytes, cudaStream_t stream);
void gather_segment_lse(float* dst, const float* lse, const int32_t* starts, const int32_t* lens, int64_t n,
                        int64_t heads, int64_t seq, int64_t call_seq, cudaStream_t stream);
void scatter_segment_lse(float* lse, const float* src, const int32_t* starts, const int32_t* lens, int64_t n,
                         int64_t heads, int64_t seq, int64_t call_seq, cudaStream_t stream);

// Zeroes the rows of x [batch·seq, width] at padded positions (i >= s.seq_lens[b], which must be set) and, where lse
// is given, lse [batch, n_heads, seq] there (cudnn_attention_rows.cu).
void zero_padded_attention_rows(__nv_bfloat16* x, int64_t width, float* lse, const AttnShape& s, cudaStream_t stream);
// The gradients' padded rows zeroed where the call has lengths: what cuDNN leaves there (or never writes) is not kept.
void zero_padded_gradient_rows(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv, const AttnShape& s,
                               cudaStream_t stream);

}  // namespace mt::cuda
