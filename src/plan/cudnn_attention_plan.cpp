// cuDNN attention's workspace and the per-direction choice (see cudnn_attention_plan.h).
#include "plan/cudnn_attention_plan.h"

#include <algorithm>

#include "core/error.h"

namespace mt {
namespace {

constexpr int64_t align_up(int64_t n) { return (n + 255) / 256 * 256; }
constexpr int64_t round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

std::string mib(int64_t bytes) { return MT_FORMAT("{:.1f} MiB", static_cast<double>(bytes) / 1048576.0); }

}  // namespace

std::string cudnn_attention_gap(const AttnShape& s, DType dtype) {
  if (dtype != DType::bf16) return "fp32 (cuDNN's fused attention is bf16/fp16 only)";
  if (s.segments != nullptr && s.segment_batch == nullptr) return "packed segments without their virtual batch";
  if (s.head_dim % 8 != 0 || s.head_dim > 256) return MT_FORMAT("head_dim {} (a multiple of 8 up to 256)", s.head_dim);
  if (s.seq < 2) return "seq < 2";
  const int64_t dv = s.value_head_dim();
  if (dv % 8 != 0 || dv > s.head_dim)
    return MT_FORMAT("value head_dim {} (a multiple of 8 up to the q/k head_dim {})", dv, s.head_dim);
  return "";
}

std::string cudnn_layer_gap(const AttentionSpec& a, DType dtype, int64_t v_head_dim) {
  AttnShape s{.batch = 1, .seq = 2, .n_heads = a.num_heads, .n_kv_heads = a.num_kv_heads, .head_dim = a.head_dim,
              .v_head_dim = v_head_dim};
  return cudnn_attention_gap(s, dtype);
}

std::string cudnn_version_gap(const AttnShape& s, bool backward, int64_t version) {
  if (version == 91000 || version == 91001)
    return "cuDNN 9.10.0/9.10.1 (SDPA bf16 known bugs, as cudnn-frontend refuses them)";
  if (s.softcap > 0.f && version < 90600)
    return "soft-cap needs cuDNN 9.6 or later (a score modifier in the SDPA graph)";
  if (s.sinks != nullptr && !backward && version < 91300)
    return MT_FORMAT("attention sinks need cuDNN 9.13 or later (the SDPA sink pattern), not {}.{}.{}", version / 10000,
                     version / 100 % 100, version % 100);
  return "";
}

std::string cudnn_frontend_gap(const AttnShape& s, bool backward, bool ragged, int64_t version) {
  if (!backward || ragged || s.seq % 128 == 0 || version > 91500 || (s.softcap <= 0.f && s.alibi_slopes == nullptr))
    return "";
  return MT_FORMAT(
      "{} backward at key length {} (not a multiple of 128) on cuDNN {}.{}.{}: cudnn-frontend 1.32 adds its own "
      "full-length padding mask there (cuDNN 9.15 and older), which it refuses beside a score modifier",
      s.softcap > 0.f ? "soft-capped" : "ALiBi", s.seq, version / 10000, version / 100 % 100, version % 100);
}

int64_t CudnnAttentionPlan::seq_bucket(int64_t seq) const {
  if (!switches_.cudnn_seq_buckets) return seq;
  int64_t octave = 1;
  while (octave * 2 <= seq) octave *= 2;
  const int64_t step = std::max<int64_t>(64, octave / 8);
  return (seq + step - 1) / step * step;
}

const char* CudnnAttentionPlan::backward_name() const {
  return deterministic_backward() ? "deterministic backward"
                                  : "non-deterministic backward (MEGATRAIN_ATTENTION_DETERMINISTIC=0)";
}

int64_t CudnnAttentionPlan::backward_graph_bytes(int64_t batch, int64_t bucket_seq, int64_t n_heads,
                                                 int64_t head_dim) const {
  const int64_t rows = round_up(bucket_seq, 64), cols = round_up(bucket_seq, 128);
  const int64_t dq = batch * n_heads * rows * head_dim * 4, softmax_sum = align_up(batch * n_heads * bucket_seq * 4);
  if (!deterministic_backward())
    return align_up(dq) + align_up(batch * n_heads * bucket_seq * head_dim * 4) + softmax_sum + kCudnnGraphUnit;
  const int64_t dp = batch * n_heads * rows * cols * 2;
  return align_up(dp + dq) + softmax_sum + kCudnnGraphUnit;
}

namespace {
// ALiBi's bias depends on the tile's place (its graph indexes within the tile): it runs as one graph.
bool tiles_at(const AttnShape& s, int64_t tile) {
  return tile > 0 && s.seq > tile && !(s.window > 0 && s.window < s.seq) && s.alibi_slopes == nullptr;
}
}  // namespace

int64_t CudnnAttentionPlan::backward_tile(const AttnShape& s) const {
  if (!deterministic_backward()) return 0;
  const int64_t tile = switches_.cudnn_backward_tile;
  return tiles_at(s, tile) ? tile : 0;
}

int64_t cudnn_tiled_side_bytes(const AttnShape& s, int64_t T) {
  const int64_t b = s.batch, h = s.n_heads, qw = s.n_heads * s.head_dim, kw = s.n_kv_heads * s.head_dim;
  const int64_t ow = s.n_heads * s.value_head_dim(), vw = s.n_kv_heads * s.value_head_dim();
  const int64_t rows = (s.seq + T - 1) / T * T;
  const int64_t q_tile = align_up(b * T * qw * 2), kv_tile = align_up(b * T * kw * 2), row = align_up(b * h * T * 4);
  const int64_t o_tile = align_up(b * T * ow * 2), v_tile = align_up(b * T * vw * 2);
  return row + 2 * q_tile + 2 * o_tile + 2 * kv_tile + 2 * v_tile + align_up(b * T * qw * 4) +
         align_up(b * rows * kw * 4) + align_up(b * rows * vw * 4) + 2 * align_up(b * 4);
}

int64_t CudnnAttentionPlan::tiled_backward_bytes(const AttnShape& s, int64_t T) const {
  return backward_graph_bytes(s.batch, T, s.n_heads, s.head_dim) + cudnn_tiled_side_bytes(s, T);
}

namespace {

// The staging copies at the bucket length Sp.
int64_t staging_at(bool backward, const AttnShape& s, int64_t Sp) {
  const int64_t b = s.batch, h = s.n_heads, hk = s.n_kv_heads, d = s.head_dim, dv = s.value_head_dim();
  const int64_t q_bytes = align_up(b * Sp * h * d * 2), kv_bytes = align_up(b * Sp * hk * d * 2);
  const int64_t o_bytes = align_up(b * Sp * h * dv * 2), v_bytes = align_up(b * Sp * hk * dv * 2);
  const int64_t rest = align_up(b * h * Sp * 4) + align_up(b * 4);
  // forward: q, k, v, o; backward: q, o, dO, dQ, k, v, dK, dV
  return backward ? 2 * q_bytes + 2 * o_bytes + 2 * kv_bytes + 2 * v_bytes + rest
                  : q_bytes + o_bytes + kv_bytes + v_bytes + rest;
}

}  // namespace

int64_t CudnnAttentionPlan::backward_call_bytes(const AttnShape& s, int64_t n) const {
  AttnShape c = s;
  c.batch = n;
  if (const int64_t tile = backward_tile(s); tile > 0) return tiled_backward_bytes(c, tile);
  const int64_t Sp = seq_bucket(s.seq);
  return backward_graph_bytes(n, Sp, s.n_heads, s.head_dim) + (seq_bucket(1) != 1 ? staging_at(true, c, Sp) : 0);
}

int64_t CudnnAttentionPlan::backward_batch(const AttnShape& s, int64_t limit_bytes) const {
  const int64_t batch = std::max<int64_t>(s.batch, 1);
  if (limit_bytes < 0 || backward_call_bytes(s, batch) <= limit_bytes) return batch;
  int64_t lo = 1, hi = batch - 1;  // the bytes grow with n: the most that fit, at least one
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (backward_call_bytes(s, mid) <= limit_bytes)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

AttnShape CudnnAttentionPlan::backward_call(const AttnShape& s, int64_t b0, int64_t limit_bytes) const {
  AttnShape c = s;
  c.batch = std::min(backward_batch(s, limit_bytes), s.batch - b0);
  if (s.seq_lens != nullptr) c.seq_lens = s.seq_lens + b0;
  return c;
}

int64_t CudnnAttentionPlan::staging_bytes(bool backward, const AttnShape& s) const {
  const int64_t Sp = seq_bucket(s.seq);
  return Sp == s.seq ? 0 : staging_at(backward, s, Sp);
}

AttnShape CudnnAttentionPlan::segment_group_shape(const AttnShape& s, const SegmentGroup& g) const {
  AttnShape v = s;
  v.batch = g.sequences;
  v.seq = seq_bucket(std::max<int64_t>(std::min(g.bound, s.seq), 2));
  v.seq_lens = s.segment_batch->lens + g.first;
  v.segments = nullptr;
  v.segment_batch = nullptr;
  return v;
}

int64_t cudnn_segment_staging_bytes(bool backward, const AttnShape& v) { return staging_at(backward, v, v.seq); }

int64_t CudnnAttentionPlan::segment_call_bytes(bool backward, const AttnShape& v, int64_t n) const {
  AttnShape c = v;
  c.batch = n;
  const int64_t staging = cudnn_segment_staging_bytes(backward, c);
  if (!backward) return kCudnnGraphUnit + staging;
  if (const int64_t tile = backward_tile(v); tile > 0) return tiled_backward_bytes(c, tile) + staging;
  return backward_graph_bytes(n, v.seq, v.n_heads, v.head_dim) + staging;
}

int64_t CudnnAttentionPlan::segment_call_batch(bool backward, const AttnShape& v, int64_t limit_bytes) const {
  const int64_t batch = std::max<int64_t>(v.batch, 1);
  if (limit_bytes < 0 || segment_call_bytes(backward, v, batch) <= limit_bytes) return batch;
  int64_t lo = 1, hi = batch - 1;  // the bytes grow with n: the most that fit, at least one
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (segment_call_bytes(backward, v, mid) <= limit_bytes)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

CudnnWorkspace CudnnAttentionPlan::workspace(const AttnShape& s, int64_t limit_bytes) const {
  const AttnShape c = backward_call(s, 0, limit_bytes);
  const int64_t Sp = seq_bucket(s.seq), tile = backward_tile(s);
  return {kCudnnGraphUnit + staging_bytes(false, s),
          tile > 0 ? tiled_backward_bytes(c, tile)
                   : backward_graph_bytes(c.batch, Sp, c.n_heads, c.head_dim) + staging_bytes(true, c)};
}

CudnnWorkspace CudnnAttentionPlan::reserve(const AttnShape& longest, int64_t call_batch, bool packed) const {
  if (packed) {
    AttnShape one = longest;
    one.batch = 1;
    one.seq = seq_bucket(longest.seq);
    const CudnnWorkspace w = reserve(longest, call_batch);
    return {std::max(w.forward, segment_call_bytes(false, one, 1)),
            std::max(w.backward, segment_call_bytes(true, one, 1))};
  }
  const bool buckets = seq_bucket(1) != 1;  // off (MEGATRAIN_CUDNN_SEQ_BUCKETS=0): nothing is ever staged
  const int64_t n = call_batch > 0 ? std::min(call_batch, longest.batch) : longest.batch;
  const int64_t forward = kCudnnGraphUnit + (buckets ? staging_at(false, longest, seq_bucket(longest.seq)) : 0);
  const int64_t tile = backward_tile(longest);
  if (tile == 0) return {forward, backward_call_bytes(longest, n)};
  // Past the tile: the forward as one graph; the backward in tiles (their side tensors grow with the length), or
  // for batches no longer than the tile one graph of it.
  AttnShape at_tile = longest;
  at_tile.seq = tile;
  return {forward, std::max(backward_call_bytes(longest, n), backward_call_bytes(at_tile, n))};
}

int64_t CudnnAttentionPlan::workspace_limit(int64_t planned_bytes) const {
  if (const int64_t mib_value = switches_.cudnn_workspace_mib; mib_value >= 0) return mib_value << 20;
  return choice() == AttentionChoice::automatic ? planned_bytes : -1;
}

AttentionDecision CudnnAttentionPlan::choose(bool backward, const std::string& gap, int64_t workspace_bytes,
                                             int64_t limit_bytes) const {
  if (choice() == AttentionChoice::ours) return {false, "MEGATRAIN_ATTENTION=ours"};
  if (!gap.empty()) return {false, "not covered by cuDNN: " + gap};
  if (limit_bytes >= 0 && workspace_bytes > limit_bytes)
    return {false, MT_FORMAT("cuDNN's {} workspace {} is over the {} allowed ({})",
                             backward ? backward_name() : "forward", mib(workspace_bytes), mib(limit_bytes),
                             switches_.cudnn_workspace_mib >= 0 ? "MEGATRAIN_CUDNN_WORKSPACE_MIB"
                                                                 : "the memory plan's reserve")};
  return {true, backward ? MT_FORMAT("cuDNN {}", backward_name()) : "cuDNN forward"};
}

std::string CudnnAttentionPlan::describe_choice(int64_t limit_bytes) const {
  if (choice() == AttentionChoice::ours) return "MEGATRAIN_ATTENTION=ours: our kernel in both directions";
  const int64_t tile = deterministic_backward() ? switches_.cudnn_backward_tile : 0;
  return MT_FORMAT(
      "MEGATRAIN_ATTENTION={}: forward cuDNN where it covers the case (bf16, soft-capped or not, sinks from cuDNN "
      "9.13, ALiBi, packed segments and chunks as a virtual batch); backward cuDNN's {}{} {}; our kernel elsewhere "
      "and wherever a plan does not finalize",
      attention_choice_name(choice()), backward_name(),
      tile > 0 ? MT_FORMAT(" (past {} tokens in tiles of that length, no window)", tile) : std::string(),
      limit_bytes >= 0 ? MT_FORMAT("where its workspace and staging fit {}", mib(limit_bytes))
                       : std::string("wherever the GPU can hold its workspace"));
}

std::string CudnnAttentionPlan::describe_plan(const GpuPlan& g) const {
  if (g.cudnn_backward)
    return MT_FORMAT("cuDNN forward and {}{}; {} of cuDNN workspace reserved at the micro-batch of {}{}",
                     backward_name(),
                     g.cudnn_backward_tile > 0 ? MT_FORMAT(" (in tiles of {} tokens)", g.cudnn_backward_tile) : "",
                     mib(g.attention_workspace), g.micro_batch_size,
                     g.cudnn_call_batch < g.micro_batch_size
                         ? MT_FORMAT(", the backward in calls of {} sequence(s)", g.cudnn_call_batch)
                         : "");
  if (g.cudnn_backward_need > 0)
    return MT_FORMAT(
        "cuDNN forward ({} of staging reserved), our backward: cuDNN's {} would need {} at the "
        "micro-batch of {}, which the GPU does not hold beside the rest of the plan",
        mib(g.attention_workspace), backward_name(), mib(g.cudnn_backward_need), g.micro_batch_size);
  return "our kernel in both directions (no attention layer that cuDNN covers)";
}

}  // namespace mt
