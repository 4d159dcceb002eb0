// cuDNN's SDPA operation graphs (src/backend/cuda/cudnn_sdpa_graph.h) built without a GPU: every variant training
// can ask for (forward and backward, deterministic or not, padded, ragged, causal or a tile below the diagonal,
// sinks, ALiBi, soft-cap, window, MHA and GQA, head_dim 64/128/256) adds its tensors and operations, and each
// descriptor finalizes in the cuDNN library this build links, with the scalars of rank 1 or 4 as CudnnAttention
// tries them; the graph takes the device tensors its spec says (what its calls bind), and the side tensors' bytes are
// the workspace formula's. The plan needs a handle, hence the GPU: the op table (test_cuda_cudnn_attention.cpp) runs
// it there. And the builder's first failure names the operation and the attribute.
#ifdef MEGATRAIN_HAVE_CUDNN
#include <cstdint>
#include <set>
#include <string>
#include <utility>

#include "backend/cuda/cudnn_graph_builder.h"
#include "backend/cuda/cudnn_sdpa_graph.h"
#include "catch.h"

namespace {

namespace cu = mt::cuda;

struct Variant {
  bool backward, deterministic, padding, ragged, causal, sinks, alibi, softcap, window;
  int64_t n_heads, n_kv_heads, head_dim;
  std::string describe() const {
    return std::string(backward ? (deterministic ? "backward" : "backward non-deterministic") : "forward") +
           (padding ? (ragged ? " ragged" : " padded") : "") + (causal ? "" : " unmasked") + (sinks ? " sinks" : "") +
           (alibi ? " ALiBi" : "") + (softcap ? " soft-cap" : "") + (window ? " window" : "") + " heads " +
           std::to_string(n_heads) + "/" + std::to_string(n_kv_heads) + " head_dim " + std::to_string(head_dim);
  }
};

// The device tensors a variant's graph takes, from its spec alone: what its calls bind.
std::set<int64_t> expected_device_uids(const Variant& v) {
  std::set<int64_t> uids{cu::uid_q, cu::uid_k, cu::uid_v, cu::uid_o, cu::uid_stats};
  if (v.backward) uids.insert({cu::uid_do, cu::uid_dq, cu::uid_dk, cu::uid_dv, cu::uid_softmax_sum});
  if (v.backward && !v.deterministic) uids.insert(cu::uid_dq_accum);
  if (v.padding) uids.insert({cu::uid_seq_q, cu::uid_seq_kv});
  if (v.ragged) uids.insert({cu::uid_q_ragged, cu::uid_kv_ragged});
  if (v.sinks) uids.insert(cu::uid_sinks);
  if (v.alibi) uids.insert(cu::uid_alibi);
  return uids;
}

// Adds the variant's graph with scalars of rank 1, then 4, as CudnnAttention::graph does; the first that builds.
struct Built {
  bool ok = false;
  std::string errors;
  cu::SdpaSideTensors side;
  std::set<int64_t> device_uids;
};
Built build(const Variant& v, const mt::AttnShape& s) {
  Built out;
  for (const int scalar_rank : {1, 4}) {
    cu::CudnnGraphBuilder B(nullptr, scalar_rank);
    out.side = cu::add_sdpa_graph(
        B, s,
        {v.backward, v.deterministic, v.padding, v.causal, v.ragged, v.sinks, static_cast<int64_t>(cudnnGetVersion())});
    if (B.ok()) {
      out.ok = true;
      out.device_uids = B.device_uids();
      return out;
    }
    out.errors += "rank " + std::to_string(scalar_rank) + ": " + B.error() + "; ";
  }
  return out;
}

}  // namespace

TEST_CASE("cuDNN SDPA graphs: every variant's descriptors finalize without a GPU", "[cudnn_graph]") {
  const int64_t version = static_cast<int64_t>(cudnnGetVersion());
  INFO("cuDNN " << version);
  REQUIRE(version >= 90000);
  const float slopes = 0.f, sink = 0.f;  // only whether the shape has them counts here
  int built = 0;
  for (const bool backward : {false, true})
    for (const bool deterministic : {true, false}) {
      if (!backward && !deterministic) continue;  // the forward has one graph
      for (const int masks : {0, 1, 2}) {         // unpadded, padded, ragged
        const bool padding = masks > 0, ragged = masks == 2;
        for (const bool causal : {true, false})
          for (const bool sinks : {false, true}) {
            if (sinks && (backward || version < 91300)) continue;  // the backward's graph has none
            for (const bool alibi : {false, true})
              for (const bool softcap : {false, true})
                for (const bool window : {false, true})
                  for (const auto& [h, hk] : {std::pair<int64_t, int64_t>{4, 4}, {8, 2}})
                    for (const int64_t d : {64, 128, 256}) {
                      const Variant v{backward, deterministic, padding, ragged, causal, sinks,
                                      alibi,    softcap,       window,  h,      hk,     d};
                      mt::AttnShape s{.batch = 2, .seq = 256, .n_heads = h, .n_kv_heads = hk, .head_dim = d};
                      s.window = window ? 64 : 0;
                      s.softcap = softcap ? 30.f : 0.f;
                      s.alibi_slopes = alibi ? &slopes : nullptr;
                      s.sinks = sinks ? &sink : nullptr;
                      const Built b = build(v, s);
                      INFO(v.describe() << ": " << b.errors);
                      REQUIRE(b.ok);
                      const int64_t softmax_sum = backward ? cu::align_up(2 * h * 256 * 4) : 0;
                      CHECK(b.side.softmax_sum_bytes == softmax_sum);
                      const bool accumulates = backward && !deterministic;
                      CHECK(b.side.dq_accum_bytes == (accumulates && !ragged ? cu::align_up(2 * h * 256 * d * 4) : 0));
                      CHECK(b.side.ragged_dq_accum == (accumulates && ragged));
                      CHECK(b.device_uids == expected_device_uids(v));
                      ++built;
                    }
          }
      }
    }
  const int per_kind = 3 * 2 * 2 * 2 * 2 * 2 * 3;  // masks, causal, ALiBi, soft-cap, window, heads, head_dim
  CHECK(built == per_kind * ((version >= 91300 ? 2 : 1) + 2));  // the forward with sinks and without, both backwards
}

TEST_CASE("cuDNN graph builder: the first failing call names the operation and the attribute", "[cudnn_graph]") {
  cu::CudnnGraphBuilder B(nullptr, 4);
  const int64_t x = B.io(1, "x", CUDNN_DATA_FLOAT, {1, 2, 8, 8}, {128, 64, 8, 1});
  const int64_t y = B.io(2, "y", CUDNN_DATA_FLOAT, {1, 2, 8, 1}, {16, 8, 1, 1});
  const int64_t wrong_rank = B.virt("wrong rank", CUDNN_DATA_FLOAT, {2, 8, 8}, {64, 8, 1});
  REQUIRE(B.ok());
  B.pointwise("mismatch", CUDNN_POINTWISE_ADD, x, wrong_rank, -1, x);
  REQUIRE_FALSE(B.ok());
  const std::string first = B.error();
  INFO(first);
  CHECK(first.rfind("pointwise 'mismatch' CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR cudnnBackendFinalize: ", 0) ==
        0);
  B.reduction("later", CUDNN_REDUCE_TENSOR_MAX, x, y);  // does nothing: the first failure is kept
  CHECK(B.error() == first);
}
#endif
