// cuDNN's backward in tiles (see cudnn_attention.h, plan/cudnn_attention_plan.h's cudnn_backward_tile): two
// tile-long graphs, a causal one on the diagonal and an unmasked one below it, run over the tiles in a fixed order and
// summed in fp32. Invariant: the sums' order depends only on the shape, so the gradients are the same bits on every
// run, and the workspace does not grow with the square of the sequence.
#include <algorithm>
#include <utility>

#include "kernels/attention/cudnn_attention.h"
#include "kernels/attention/cudnn_attention_graph.h"
#include "kernels/attention/cudnn_attention_pack.h"

namespace mt::cuda {

CudnnAttention::TileGraphs CudnnAttention::tile_graphs(const AttnShape& s, int64_t T) {
  AttnShape tile = s;
  tile.seq = T;
  tile.seq_lens = nullptr;
  const bool padded = s.seq_lens != nullptr;  // each tile's lengths (tile_lengths) skip its padded rows
  Graph& diagonal = graph(true, tile, padded, true, true);
  Graph& below = graph(true, tile, padded, true, false);
  const bool ok = diagonal.info.ok && below.info.ok;
  return {&diagonal, &below,
          ok ? std::max(diagonal.plan_bytes, below.plan_bytes) + cudnn_tiled_side_bytes(s, T) : int64_t{-1}};
}

// The tiles in a fixed order: for each row i of query tiles (q, o, dO and lse gathered into tile buffers, rows past
// the sequence 0 and their lse kCudnnPadLse, as padded rows'), the key tiles j <= i (k, v gathered; j == i the
// diagonal graph), each tile's dQ summed into the row's fp32 accumulator and its dK, dV into the sequence's; the
// row's dQ stored when it is done, dK and dV at the end. A padded call's tiles carry each sequence's lengths within
// the tile, so that cuDNN skips the padded rows and columns (a packed group's long segments, a right-padded batch):
// what it leaves in their dq, dk, dv rows lands only on padded rows, which are zeroed at the end.
bool CudnnAttention::tiled_backward(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv, const __nv_bfloat16* dout,
                                    const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                    const __nv_bfloat16* out, const float* lse, const AttnShape& s, int64_t T) {
  const TileGraphs tiles = tile_graphs(s, T);
  if (tiles.workspace_bytes < 0) return false;
  Graph &diagonal = *tiles.diagonal, &below = *tiles.below;
  if (!reserve_workspace(diagonal, tiles.workspace_bytes - diagonal.info.workspace_bytes)) return false;
  const int64_t b = s.batch, S = s.seq, h = s.n_heads, qw = h * s.head_dim, kw = s.n_kv_heads * s.head_dim;
  const int64_t ow = h * s.value_head_dim(), vw = s.n_kv_heads * s.value_head_dim();
  const int64_t n = (S + T - 1) / T;
  char* ws = static_cast<char*>(workspace_);
  char* at = ws + std::max(diagonal.plan_bytes, below.plan_bytes);
  auto take = [&](int64_t bytes) {
    char* p = at;
    at += align_up(bytes);
    return p;
  };
  auto* lse_tile = reinterpret_cast<float*>(take(b * h * T * 4));
  using bf = __nv_bfloat16;
  auto *q_tile = reinterpret_cast<bf*>(take(b * T * qw * 2)), *o_tile = reinterpret_cast<bf*>(take(b * T * ow * 2));
  auto *do_tile = reinterpret_cast<bf*>(take(b * T * ow * 2)), *dq_tile = reinterpret_cast<bf*>(take(b * T * qw * 2));
  auto *k_tile = reinterpret_cast<bf*>(take(b * T * kw * 2)), *v_tile = reinterpret_cast<bf*>(take(b * T * vw * 2));
  auto *dk_tile = reinterpret_cast<bf*>(take(b * T * kw * 2)), *dv_tile = reinterpret_cast<bf*>(take(b * T * vw * 2));
  auto* dq_acc = reinterpret_cast<float*>(take(b * T * qw * 4));
  auto* dk_acc = reinterpret_cast<float*>(take(b * n * T * kw * 4));
  auto* dv_acc = reinterpret_cast<float*>(take(b * n * T * vw * 4));
  auto *q_lens = reinterpret_cast<int32_t*>(take(b * 4)), *kv_lens = reinterpret_cast<int32_t*>(take(b * 4));
  const int64_t kv_rows = n * T;  // the accumulators' rows per sequence
  for (int64_t i = 0; i < n; ++i) {
    gather_rows(q_tile, q, b, S, i * T, T, qw * 2, stream_);
    gather_rows(o_tile, out, b, S, i * T, T, ow * 2, stream_);
    gather_rows(do_tile, dout, b, S, i * T, T, ow * 2, stream_);
    gather_lse(lse_tile, lse, b, h, S, i * T, T, s.seq_lens, stream_);
    if (diagonal.padding) tile_lengths(q_lens, s.seq_lens, b, i * T, T, stream_);
    for (int64_t j = 0; j <= i; ++j) {
      const Graph& g = j == i ? diagonal : below;
      gather_rows(k_tile, k, b, S, j * T, T, kw * 2, stream_);
      gather_rows(v_tile, v, b, S, j * T, T, vw * 2, stream_);
      Bindings ptrs = backward_bindings(q_tile, k_tile, v_tile, o_tile, do_tile, lse_tile, dq_tile, dk_tile, dv_tile);
      if (g.padding) {
        tile_lengths(kv_lens, s.seq_lens, b, j * T, T, stream_);
        ptrs.add(uid_seq_q, q_lens);
        ptrs.add(uid_seq_kv, kv_lens);
      }
      execute(handle_, g, ptrs, ws);
      accumulate_rows(dq_acc, T * qw, dq_tile, T * qw, b, T, qw, j == 0, stream_);
      accumulate_rows(dk_acc + j * T * kw, kv_rows * kw, dk_tile, T * kw, b, T, kw, i == j, stream_);
      accumulate_rows(dv_acc + j * T * vw, kv_rows * vw, dv_tile, T * vw, b, T, vw, i == j, stream_);
    }
    store_rows(dq + i * T * qw, S * qw, dq_acc, T * qw, b, std::min(T, S - i * T), qw, stream_);
  }
  store_rows(dk, S * kw, dk_acc, kv_rows * kw, b, S, kw, stream_);
  store_rows(dv, S * vw, dv_acc, kv_rows * vw, b, S, vw, stream_);
  zero_padded_gradient_rows(dq, dk, dv, s, stream_);
  return true;
}

}  // namespace mt::cuda
