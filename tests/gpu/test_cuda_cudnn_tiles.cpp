// cuDNN's backward in tiles and in calls of a few sequences (kernels/attention/cudnn_attention_tiles.cpp,
// plan/cudnn_attention_plan.h's cudnn_backward_tile and cudnn_backward_batch) against the CPU reference and against
// one graph's bits.
#ifdef MEGATRAIN_HAVE_CUDNN
#include <vector>

#include "kernels/attention/cudnn_attention.h"
#include "gpu/cudnn_attention_cases.h"
#include "gpu/gpu_test_util.h"
#include "plan/cudnn_attention_plan.h"

// The deterministic backward in tiles (plan/cudnn_attention_plan.h: cudnn_backward_tile), with tiles made short by
// MEGATRAIN_CUDNN_BACKWARD_TILE so that a few thousand tokens run several rows of them: against the reference (the
// forward before it too, and d_sinks with sinks), bit for bit on a repeat, padded rows 0, near the one-graph
// backward, and within the plan's workspace formula.
namespace {

using namespace mt::test;

struct TiledCase {
  CudnnCase c;  // no window (windows run as one graph), default scale
  const char* tile;
  int64_t want_tile;
};

void check_tiled_backward(const std::vector<TiledCase>& cases) {
  MT_REQUIRE_GPU();
  CudnnPerSwitches cudnns;
  mt::cuda::CudnnAttention* const cudnn = &cudnns.current();
  REQUIRE(cudnn->version() > 0);
  for (const auto& [c, tile, want_tile] : cases) {
    DYNAMIC_SECTION(c.batch << "x" << c.seq << " " << c.heads << "/" << c.kv_heads << " hd" << c.head_dim << " tile"
                            << tile << (c.sinks ? " sinks" : "")) {
      INFO(c.name);
      const int64_t T = c.batch * c.seq, q_size = T * c.heads * c.head_dim, kv_size = T * c.kv_heads * c.head_dim;
      const int64_t o_size = T * c.heads * c.value_head_dim(), v_size = T * c.kv_heads * c.value_head_dim();
      const CaseShapes shapes = case_shapes(c);
      const mt::AttnShape &host = shapes.host, &dev = shapes.dev;
      const auto [q, k, v, dout] = inputs(q_size, kv_size, 81, c.magnitude, v_size, o_size);
      const Reference want = reference(q, k, v, dout, host);
      auto d_q = upload<bf16>(q), d_k = upload<bf16>(k), d_v = upload<bf16>(v), d_dout = upload<bf16>(dout);
      DeviceBuffer<bf16> out(o_size), dq(q_size), dk(kv_size), dv(v_size), dq2(q_size), dk2(kv_size), dv2(v_size);
      DeviceBuffer<bf16> dq1(q_size), dk1(kv_size), dv1(v_size);
      DeviceBuffer<float> lse(c.batch * c.heads * c.seq);
      REQUIRE(cudnn->forward(out.get(), lse.get(), d_q->get(), d_k->get(), d_v->get(), dev));
      check_close("cudnn forward out", download(out), want.out, tolerance<bf16>);
      check_close("cudnn forward lse", download(lse), want.lse, 1e-4);
      if (c.sinks)
        check_close("d_sinks from cudnn's out and lse", sinks_gradient(*d_dout, out, lse, dev), want.d_sinks,
                    tolerance<bf16>);
      {
        const Env whole("MEGATRAIN_CUDNN_BACKWARD_TILE", "0");
        mt::cuda::CudnnAttention* const one_graph = &cudnns.current();
        REQUIRE(one_graph->plan().backward_tile(dev) == 0);
        REQUIRE(one_graph->backward(dq1.get(), dk1.get(), dv1.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(),
                                out.get(), lse.get(), dev));
      }
      const Env tiles("MEGATRAIN_CUDNN_BACKWARD_TILE", tile);
      mt::cuda::CudnnAttention* const tiled = &cudnns.current();
      REQUIRE(tiled->plan().backward_tile(dev) == want_tile);
      const int64_t need = tiled->workspace_need(true, dev);
      const int64_t planned = tiled->plan().tiled_backward_bytes(dev, want_tile);
      INFO("tiled backward workspace: " << need << " B, plan " << planned << " B");
      REQUIRE(need > 0);
      CHECK(need <= planned);
      REQUIRE(tiled->backward(dq.get(), dk.get(), dv.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(),
                              out.get(), lse.get(), dev));
      REQUIRE(tiled->backward(dq2.get(), dk2.get(), dv2.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(),
                              out.get(), lse.get(), dev));
      const auto got_dq = download(dq), got_dk = download(dk), got_dv = download(dv);
      check_close("tiled dq", got_dq, want.dq, tolerance<bf16>);
      check_close("tiled dk", got_dk, want.dk, tolerance<bf16>);
      check_close("tiled dv", got_dv, want.dv, tolerance<bf16>);
      CHECK(same_bits(got_dq, download(dq2)));
      CHECK(same_bits(got_dk, download(dk2)));
      CHECK(same_bits(got_dv, download(dv2)));
      CHECK(nonzero_padding(got_dq, c, c.heads * c.head_dim) == 0);
      CHECK(nonzero_padding(got_dk, c, c.kv_heads * c.head_dim) == 0);
      CHECK(nonzero_padding(got_dv, c, c.kv_heads * c.value_head_dim()) == 0);
      // Against the one graph: both bf16 roundings of the same sums (the tiles round each tile's part once more).
      check_close("tiled dq against one graph", got_dq, download(dq1), 1e-2);
      check_close("tiled dk against one graph", got_dk, download(dk1), 1e-2);
      check_close("tiled dv against one graph", got_dv, download(dv1), 1e-2);
    }
  }
}

}  // namespace

TEST_CASE("cudnn attention: the deterministic backward in tiles matches the reference", "[gpu][attention][cudnn]") {
  check_tiled_backward({
      {{"GQA 2, length 4096 in tiles of 1024 (10 tiles)", 1, 4096, 4, 2, 64, 0, {}}, "1024", 1024},
      {{"GQA 4, odd length 3000 (the last tile 952 rows), padded 3000/1777, tiles of 1024", 2, 3000, 8, 2, 128, 0,
        {3000, 1777}},
       "1024", 1024},
      {{"MQA, odd length 1100 in tiles of 256 (the last 76 rows)", 1, 1100, 4, 1, 64, 0, {}}, "256", 256},
      {{"soft-cap 2, GQA 2, head_dim 256, padded 2048/1500, tiles of 512", 2, 2048, 4, 2, 256, 0, {2048, 1500}, 0.f,
        true, 2.f, 1.5f},
       "512", 512},
      {{"MHA, length 640 in tiles of 512 (the last 128 rows), padded 640/639/1", 3, 640, 4, 4, 128, 0, {640, 639, 1}},
       "512", 512},
      {{"sinks: GPT-OSS-like 8/1 heads of 64, odd length 1500 (the last tile 476 rows), padded 1500/1001, tiles of "
        "512",
        2, 1500, 8, 1, 64, 0, {1500, 1001}, 0.f, true, 0.f, 1.f, true},
       "512", 512},
      {{"MLA: 8 heads, q/k 192, value 128, odd length 1300 (the last tile 276 rows), padded 1300/900, tiles of 512", 2,
        1300, 8, 8, 192, 0, {1300, 900}, 0.f, true, 0.f, 1.f, false, false, 128},
       "512", 512},
  });
}

// The deterministic backward over a batch in calls of one or two sequences (workspace limits that hold one call of
// that many; five sequences, so two calls of two leave one), as one graph staged between buckets and in tiles,
// padded: the bits of one call of the whole batch, which matches the reference.
TEST_CASE("cudnn attention: the backward in calls of a few sequences gives one call's bits", "[gpu][attention][cudnn]") {
  MT_REQUIRE_GPU();
  for (const bool tiled : {false, true}) {
    DYNAMIC_SECTION((tiled ? "tiles of 256, length 600" : "one graph, length 300 (the 320 bucket, staged)")) {
      const Env tile("MEGATRAIN_CUDNN_BACKWARD_TILE", tiled ? "256" : "8192");
      const int64_t batch = 5, seq = tiled ? 600 : 300, heads = 8, kv_heads = 2, head_dim = 128, T = batch * seq;
      const int64_t q_size = T * heads * head_dim, kv_size = T * kv_heads * head_dim, lse_size = batch * heads * seq;
      const std::vector<int32_t> lens = tiled ? std::vector<int32_t>{600, 17, 599, 600, 1}
                                              : std::vector<int32_t>{300, 17, 299, 300, 1};
      const auto [q, k, v, dout] = inputs(q_size, kv_size, 71);
      mt::AttnShape host{.batch = batch, .seq = seq, .n_heads = heads, .n_kv_heads = kv_heads, .head_dim = head_dim};
      host.seq_lens = lens.data();
      auto cudnn = make_cudnn();
      auto d_lens = upload_ints(lens);
      mt::AttnShape dev = host;
      dev.seq_lens = d_lens->get();
      auto d_q = upload<bf16>(q), d_k = upload<bf16>(k), d_v = upload<bf16>(v), d_dout = upload<bf16>(dout);
      DeviceBuffer<bf16> out(q_size), dq(q_size), dk(kv_size), dv(kv_size);
      DeviceBuffer<float> lse(lse_size);
      REQUIRE(cudnn->forward(out.get(), lse.get(), d_q->get(), d_k->get(), d_v->get(), dev));
      REQUIRE(cudnn->backward(dq.get(), dk.get(), dv.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(),
                              out.get(), lse.get(), dev));
      const auto whole_dq = download(dq), whole_dk = download(dk), whole_dv = download(dv);
      const Reference want = reference(q, k, v, dout, host);
      check_close("one call dq", whole_dq, want.dq, tolerance<bf16>);
      check_close("one call dk", whole_dk, want.dk, tolerance<bf16>);
      check_close("one call dv", whole_dv, want.dv, tolerance<bf16>);
      for (const int64_t per_call : {1, 2}) {
        const int64_t limit = cudnn->plan().backward_call_bytes(dev, per_call);
        REQUIRE(cudnn->plan().backward_batch(dev, limit) == per_call);
        INFO(per_call << " a call");
        const int64_t need = cudnn->workspace_need(true, dev, limit);
        REQUIRE(need > 0);
        CHECK(need <= limit);
        MT_CUDA_OK(cudaMemsetAsync(dq.get(), 0xff, q_size * 2, test_stream()));
        MT_CUDA_OK(cudaMemsetAsync(dk.get(), 0xff, kv_size * 2, test_stream()));
        MT_CUDA_OK(cudaMemsetAsync(dv.get(), 0xff, kv_size * 2, test_stream()));
        REQUIRE(cudnn->backward(dq.get(), dk.get(), dv.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(),
                                out.get(), lse.get(), dev, limit));
        CHECK(same_bits(download(dq), whole_dq));
        CHECK(same_bits(download(dk), whole_dk));
        CHECK(same_bits(download(dv), whole_dv));
      }
    }
  }
}

// The default tile at lengths of 20 K and 32 K tokens (hidden: the CPU reference takes minutes; tools/gpu_session.sh
// attention runs it).
TEST_CASE("cudnn attention: the tiled backward at 32768 and odd 20001 tokens matches the reference",
          "[.long_attention]") {
  check_tiled_backward({
      {{"MQA, length 32768 in the default tiles of 8192, head_dim 64", 1, 32768, 2, 1, 64, 0, {}}, "8192", 8192},
      {{"GQA 2, odd length 20001 in the default tiles (the last 3617 rows), padded 20001/12345", 2, 20001, 2, 1, 128,
        0, {20001, 12345}},
       "8192", 8192},
  });
}
#endif  // MEGATRAIN_HAVE_CUDNN
