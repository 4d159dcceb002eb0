// cuDNN's SDPA operation graphs (kernels/attention/cudnn_sdpa_graph.h) without a GPU. Every variant training can ask
// for (forward and backward, deterministic or not, padded, ragged, causal or a tile below the diagonal, sinks, ALiBi,
// soft-cap, window, MHA and GQA, head_dim 64/128/256) adds its tensors and operations, and each descriptor finalizes
// in the cuDNN library this build links, with the scalars of rank 1 or 4 as CudnnAttention tries them; the graph
// takes the device tensors its spec says (what its calls bind), and the side tensors' bytes are the workspace
// formula's. What the causal graphs compute, run by a host interpreter of the graph (cudnn_graph_interpreter.h), is
// the CPU reference's attention, forward and both backwards, padded and ragged, as this cuDNN builds them and as
// cuDNN 9.5 does; the tiled backward's diagonal and below-diagonal (unmasked) graphs sum to the whole sequence's
// gradients. The plan and cuDNN's kernels need the GPU: the op table (test_cuda_cudnn_attention.cpp) runs them there.
// And the builder's first failure names the operation and the attribute.
#ifdef MEGATRAIN_HAVE_CUDNN
#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kernels/attention/cudnn_graph_builder.h"
#include "kernels/attention/cudnn_sdpa_graph.h"
#include "catch.h"
#include "gpu/cudnn_graph_interpreter.h"
#include "gpu/gpu_test_util.h"

namespace {

namespace cu = mt::cuda;
using namespace mt::test;
using bf16 = __nv_bfloat16;

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

// Latent attention's shapes (DeepSeek-V3: q/k 192, value 128; a value head dim half the q/k one): V, O, dO and dV
// at the value head dim, every graph training asks for (forward; both backwards, unpadded, padded, a tile below the
// diagonal) finalizes, and the side tensors are the q/k widths' (dQ's accumulator has Q's head dim).
TEST_CASE("cuDNN SDPA graphs: a value head dim other than the q/k one finalizes", "[cudnn_graph]") {
  for (const auto& [d, dv] : {std::pair<int64_t, int64_t>{192, 128}, {128, 64}})
    for (const bool backward : {false, true})
      for (const bool deterministic : {true, false})
        for (const bool padding : {false, true})
          for (const bool causal : {true, false}) {
            if (!backward && !deterministic) continue;
            const Variant v{backward, deterministic, padding, false, causal, false, false, false, false, 8, 8, d};
            mt::AttnShape s{.batch = 2, .seq = 256, .n_heads = 8, .n_kv_heads = 8, .head_dim = d, .v_head_dim = dv};
            s.scale = 0.1147f;
            const Built b = build(v, s);
            INFO(v.describe() << " value " << dv << ": " << b.errors);
            REQUIRE(b.ok);
            CHECK(b.device_uids == expected_device_uids(v));
            CHECK(b.side.dq_accum_bytes == (backward && !deterministic ? cu::align_up(2 * 8 * 256 * d * 4) : 0));
          }
}

namespace {

// A call of the semantic check: heads, window, scale, soft-cap, ALiBi, sinks, lengths (empty: all valid).
struct SemanticCase {
  const char* name;
  int64_t heads, kv_heads;
  int64_t window = 0;
  float scale = 0.f, softcap = 0.f;
  bool alibi = false, sinks = false;
  std::vector<int32_t> lens;
  int64_t v_head_dim = 0;  // 0: the q/k head dim (latent attention: narrower; its calls are never ragged)
};

// The rows of a [batch, seq, width] tensor that are valid (i < lens[b]), in order.
std::vector<float> valid_rows(const std::vector<float>& x, const std::vector<int32_t>& lens, int64_t seq,
                              int64_t width) {
  std::vector<float> out;
  for (size_t b = 0; b < lens.size(); ++b)
    out.insert(out.end(), x.begin() + static_cast<int64_t>(b) * seq * width,
               x.begin() + (static_cast<int64_t>(b) * seq + lens[b]) * width);
  return out;
}

// Valid rows packed back to back (valid_rows: a ragged call's layout) back into [batch, seq, width], 0 elsewhere.
std::vector<float> unpacked(const std::vector<float>& x, const std::vector<int32_t>& lens, int64_t seq, int64_t width) {
  std::vector<float> out(lens.size() * static_cast<size_t>(seq * width), 0.f);
  int64_t row = 0;
  for (size_t b = 0; b < lens.size(); ++b)
    for (int32_t i = 0; i < lens[b]; ++i, ++row)
      std::copy_n(x.begin() + row * width, width, out.begin() + (static_cast<int64_t>(b) * seq + i) * width);
  return out;
}

// lse [batch, heads, seq] entries of valid rows.
std::vector<float> valid_lse(const std::vector<float>& lse, const std::vector<int32_t>& lens, int64_t heads,
                             int64_t seq) {
  std::vector<float> out;
  for (size_t b = 0; b < lens.size(); ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int32_t i = 0; i < lens[b]; ++i) out.push_back(lse[(b * heads + h) * seq + i]);
  return out;
}

}  // namespace

// What the graphs compute, without a GPU: each call's forward graph and both backward graphs (dQ straight, and
// through the fp32 accumulator), padded and ragged, run by the host interpreter on bf16-rounded inputs and compared
// with the CPU reference's attention (causal; the unmasked graph of a tile below the diagonal is checked by the tiles'
// sum below).
TEST_CASE("cuDNN SDPA graphs compute the CPU reference's attention (host interpreter)", "[cudnn_graph]") {
  const int64_t version = static_cast<int64_t>(cudnnGetVersion());
  const int64_t batch = 2, seq = 40, d = 16;
  const std::vector<SemanticCase> cases = {
      {.name = "GQA 4:2", .heads = 4, .kv_heads = 2, .lens = {}},
      {.name = "MHA, scale 1/3, padded 40/23", .heads = 2, .kv_heads = 2, .scale = 1.f / 3.f, .lens = {40, 23}},
      {.name = "MQA, window 7, padded 40/17", .heads = 4, .kv_heads = 1, .window = 7, .lens = {40, 17}},
      {.name = "GQA 4:2, soft-cap 1.5, padded 31/40", .heads = 4, .kv_heads = 2, .softcap = 1.5f, .lens = {31, 40}},
      {.name = "MHA, ALiBi, window 9, padded 40/1",
       .heads = 4,
       .kv_heads = 4,
       .window = 9,
       .alibi = true,
       .lens = {40, 1}},
      {.name = "GQA 4:2, sinks, padded 29/40", .heads = 4, .kv_heads = 2, .sinks = true, .lens = {29, 40}},
      {.name = "GQA 4:2, everything: window 11, soft-cap 2, ALiBi, sinks, padded 40/35",
       .heads = 4,
       .kv_heads = 2,
       .window = 11,
       .softcap = 2.f,
       .alibi = true,
       .sinks = true,
       .lens = {40, 35}},
      {.name = "MLA-like MHA, value head dim 8 of 16, scale 0.3, padded 40/19",
       .heads = 4,
       .kv_heads = 4,
       .scale = 0.3f,
       .lens = {40, 19},
       .v_head_dim = 8},
      {.name = "value head dim 8 of 16, GQA 4:2", .heads = 4, .kv_heads = 2, .lens = {}, .v_head_dim = 8},
  };

  for (const SemanticCase& c : cases) {
    if (c.sinks && version < 91300) continue;
    const int64_t h = c.heads, hk = c.kv_heads, T = batch * seq, qw = h * d, kw = hk * d;
    const int64_t vd = c.v_head_dim > 0 ? c.v_head_dim : d, ow = h * vd, vw = hk * vd;
    const bool padded = !c.lens.empty();
    const std::vector<int32_t> lens = padded ? c.lens : std::vector<int32_t>(batch, static_cast<int32_t>(seq));
    const std::vector<float> q = rounded<bf16>(random_floats(T * qw, 11)), k = rounded<bf16>(random_floats(T * kw, 12));
    const std::vector<float> v = rounded<bf16>(random_floats(T * vw, 13)),
                             dout = rounded<bf16>(random_floats(T * ow, 14));
    std::vector<float> slopes, sinks;
    for (int64_t i = 0; i < h; ++i) {
      slopes.push_back(0.25f / static_cast<float>(i + 1));
      sinks.push_back(mt::round_to_bf16(0.5f + 0.3f * static_cast<float>(i)));
    }
    mt::AttnShape s{.batch = batch, .seq = seq, .n_heads = h, .n_kv_heads = hk, .head_dim = d, .v_head_dim = vd};
    s.window = c.window;
    s.scale = c.scale;
    s.softcap = c.softcap;
    s.alibi_slopes = c.alibi ? slopes.data() : nullptr;
    s.seq_lens = padded ? lens.data() : nullptr;
    s.sinks = c.sinks ? sinks.data() : nullptr;
    // The reference: fp32 on the rounded inputs; out rounded as the GPU stores it, for the backward's input.
    std::vector<float> out(static_cast<size_t>(T * ow)), lse(static_cast<size_t>(batch * h * seq));
    std::vector<float> dq(q.size()), dk(k.size()), dv(v.size());
    cpu().attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), s);
    const std::vector<float> out_bf16 = rounded<bf16>(out);
    cpu().attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(),
                             out_bf16.data(), lse.data(), s);
    const std::vector<float> lens_f(lens.begin(), lens.end());
    for (const bool ragged : {false, true}) {
      if (ragged && (!padded || vd != d)) continue;
      // A ragged call's tensors packed back to back, its offsets per sequence in elements.
      auto layout = [&](const std::vector<float>& x, int64_t width) {
        return ragged ? valid_rows(x, lens, seq, width) : x;
      };
      auto back = [&](const std::vector<float>& x, int64_t width) {
        return ragged ? unpacked(x, lens, seq, width) : x;
      };
      std::vector<float> q_offsets{0}, kv_offsets{0};
      for (const int32_t len : lens) {
        q_offsets.push_back(q_offsets.back() + static_cast<float>(len * qw));
        kv_offsets.push_back(kv_offsets.back() + static_cast<float>(len * kw));
      }
      auto bind_common = [&](CudnnGraphInterpreter& run, bool backward) {
        run.bind(cu::uid_q, layout(q, qw));
        run.bind(cu::uid_k, layout(k, kw));
        run.bind(cu::uid_v, layout(v, vw));
        run.bind(cu::uid_o, backward ? layout(out_bf16, ow) : std::vector<float>(layout(dout, ow).size(), 0.f));
        run.bind(cu::uid_stats, backward ? lse : std::vector<float>(lse.size(), 0.f));
        if (padded) {
          run.bind(cu::uid_seq_q, lens_f);
          run.bind(cu::uid_seq_kv, lens_f);
        }
        if (ragged) {
          run.bind(cu::uid_q_ragged, q_offsets);
          run.bind(cu::uid_kv_ragged, kv_offsets);
        }
        if (c.alibi) run.bind(cu::uid_alibi, slopes);
      };
      // The graph as this cuDNN has it, and as cuDNN 9.5 has it (-inf spelled lowest(), the backward's second
      // padding mask); 9.5 lacks the soft-cap and sinks.
      for (const int64_t graph_version : {version, int64_t{90500}}) {
        if (graph_version < 90600 && (c.softcap > 0.f || c.sinks)) continue;
        DYNAMIC_SECTION(c.name << (ragged ? ", ragged" : "")
                               << (graph_version == version ? "" : ", as cuDNN 9.5 builds it")) {
          cu::CudnnGraphBuilder fwd(nullptr, 4);
          cu::add_sdpa_graph(fwd, s, {false, true, padded, true, ragged, c.sinks, graph_version});
          REQUIRE(fwd.ok());
          CudnnGraphInterpreter f(fwd);
          bind_common(f, false);
          if (c.sinks) f.bind(cu::uid_sinks, sinks);
          f.run();
          check_close("graph out", valid_rows(back(f.memory(cu::uid_o), ow), lens, seq, ow),
                      valid_rows(out, lens, seq, ow), tolerance<bf16>);
          check_close("graph lse", valid_lse(f.memory(cu::uid_stats), lens, h, seq), valid_lse(lse, lens, h, seq),
                      1e-5);
          for (const bool deterministic : {true, false}) {
            INFO((deterministic ? "deterministic" : "non-deterministic") << " backward");
            cu::CudnnGraphBuilder bwd(nullptr, 4);
            const cu::SdpaSideTensors side =
                cu::add_sdpa_graph(bwd, s, {true, deterministic, padded, true, ragged, false, graph_version});
            REQUIRE(bwd.ok());
            CudnnGraphInterpreter g(bwd);
            bind_common(g, true);
            g.bind(cu::uid_do, layout(dout, ow));
            g.bind(cu::uid_dq, std::vector<float>(layout(q, qw).size(), 0.f));
            g.bind(cu::uid_dk, std::vector<float>(layout(k, kw).size(), 0.f));
            g.bind(cu::uid_dv, std::vector<float>(layout(v, vw).size(), 0.f));
            g.bind(cu::uid_softmax_sum, std::vector<float>(lse.size(), 0.f));
            if (!deterministic)
              g.bind(cu::uid_dq_accum, std::vector<float>(side.ragged_dq_accum ? layout(q, qw).size() : q.size(), 0.f));
            g.run();
            check_close("graph dq", valid_rows(back(g.memory(cu::uid_dq), qw), lens, seq, qw),
                        valid_rows(dq, lens, seq, qw), tolerance<bf16>);
            check_close("graph dk", valid_rows(back(g.memory(cu::uid_dk), kw), lens, seq, kw),
                        valid_rows(dk, lens, seq, kw), tolerance<bf16>);
            check_close("graph dv", valid_rows(back(g.memory(cu::uid_dv), vw), lens, seq, vw),
                        valid_rows(dv, lens, seq, vw), tolerance<bf16>);
          }
        }
      }
    }
  }
}

namespace {

// Rows [row0, row0 + rows) of each of `groups` blocks of `block` rows of width elements.
std::vector<float> row_slice(const std::vector<float>& x, int64_t groups, int64_t block, int64_t row0, int64_t rows,
                             int64_t width) {
  std::vector<float> out;
  for (int64_t g = 0; g < groups; ++g)
    out.insert(out.end(), x.begin() + (g * block + row0) * width, x.begin() + (g * block + row0 + rows) * width);
  return out;
}

// acc's rows [row0, row0 + rows) of each block += x [groups, rows, width].
void add_rows(std::vector<float>& acc, const std::vector<float>& x, int64_t groups, int64_t block, int64_t row0,
              int64_t rows, int64_t width) {
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t e = 0; e < rows * width; ++e) acc[(g * block + row0) * width + e] += x[g * rows * width + e];
}

}  // namespace

// The tiled backward's arithmetic on the graphs it runs, without a GPU: a sequence of 3 tiles, each tile pair's
// deterministic backward graph (causal on the diagonal, unmasked below it) run by the host interpreter with the whole
// forward's lse, and the tiles' dQ, dK, dV summed in fp32, give the CPU reference's gradients of the whole sequence.
TEST_CASE("cuDNN SDPA graphs: the diagonal and below-diagonal tiles sum to the whole backward", "[cudnn_graph]") {
  const int64_t version = static_cast<int64_t>(cudnnGetVersion());
  const int64_t batch = 2, tile = 24, n = 3, seq = n * tile, h = 4, hk = 2, d = 16, qw = h * d, kw = hk * d;
  const std::vector<float> q = rounded<bf16>(random_floats(batch * seq * qw, 21));
  const std::vector<float> k = rounded<bf16>(random_floats(batch * seq * kw, 22));
  const std::vector<float> v = rounded<bf16>(random_floats(batch * seq * kw, 23));
  const std::vector<float> dout = rounded<bf16>(random_floats(batch * seq * qw, 24));
  const mt::AttnShape whole{.batch = batch, .seq = seq, .n_heads = h, .n_kv_heads = hk, .head_dim = d};
  std::vector<float> out(q.size()), lse(static_cast<size_t>(batch * h * seq)), dq(q.size()), dk(k.size()), dv(v.size());
  cpu().attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), whole);
  const std::vector<float> out_bf16 = rounded<bf16>(out);
  cpu().attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), out_bf16.data(),
                           lse.data(), whole);
  mt::AttnShape shape = whole;
  shape.seq = tile;
  std::vector<float> dq_sum(q.size(), 0.f), dk_sum(k.size(), 0.f), dv_sum(v.size(), 0.f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j <= i; ++j) {
      cu::CudnnGraphBuilder B(nullptr, 4);
      cu::add_sdpa_graph(B, shape, {true, true, false, i == j, false, false, version});
      REQUIRE(B.ok());
      CudnnGraphInterpreter g(B);
      g.bind(cu::uid_q, row_slice(q, batch, seq, i * tile, tile, qw));
      g.bind(cu::uid_o, row_slice(out_bf16, batch, seq, i * tile, tile, qw));
      g.bind(cu::uid_do, row_slice(dout, batch, seq, i * tile, tile, qw));
      g.bind(cu::uid_stats, row_slice(lse, batch * h, seq, i * tile, tile, 1));
      g.bind(cu::uid_k, row_slice(k, batch, seq, j * tile, tile, kw));
      g.bind(cu::uid_v, row_slice(v, batch, seq, j * tile, tile, kw));
      g.bind(cu::uid_dq, std::vector<float>(static_cast<size_t>(batch * tile * qw), 0.f));
      g.bind(cu::uid_dk, std::vector<float>(static_cast<size_t>(batch * tile * kw), 0.f));
      g.bind(cu::uid_dv, std::vector<float>(static_cast<size_t>(batch * tile * kw), 0.f));
      g.bind(cu::uid_softmax_sum, std::vector<float>(static_cast<size_t>(batch * h * tile), 0.f));
      g.run();
      add_rows(dq_sum, g.memory(cu::uid_dq), batch, seq, i * tile, tile, qw);
      add_rows(dk_sum, g.memory(cu::uid_dk), batch, seq, j * tile, tile, kw);
      add_rows(dv_sum, g.memory(cu::uid_dv), batch, seq, j * tile, tile, kw);
    }
  check_close("tiled dq", dq_sum, dq, tolerance<bf16>);
  check_close("tiled dk", dk_sum, dk, tolerance<bf16>);
  check_close("tiled dv", dv_sum, dv, tolerance<bf16>);
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
