// Packed segments and chunked attention's chunks on cuDNN, as their virtual batch (backend/segment_batch.h): the
// layout built on the host as the engine builds it, groups of several length classes (fillers, padding, windows,
// soft-cap, sinks, GQA), a segment past the backward's tile, and calls split by a workspace limit; forward and the
// deterministic backward against the CPU reference with its segments, bit for bit on a repeat and across call
// splits, the non-deterministic one within tolerance (its groups ragged, or gathered), padded rows 0, each
// implementation's forward paired with the other's backward, the workspace within the plan's figure (where
// cudnn-frontend refuses a gathered group's backward graph, cuDNN 9.15 and older, our kernel's backward); and
// through the CUDA backend under MEGATRAIN_ATTENTION=cudnn, bit for bit as CudnnAttention runs.
#ifdef MEGATRAIN_HAVE_CUDNN
#include <algorithm>
#include <vector>

#include "kernels/runtime/cuda_backend.h"
#include "backend/segment_batch.h"
#include "gpu/cudnn_attention_cases.h"
#include "gpu/gpu_test_util.h"
#include "kernels/ops/kernels.h"
#include "plan/cudnn_attention_plan.h"

namespace {

using namespace mt::test;
namespace cu = mt::cuda;

const std::vector<SegmentCase>& segment_cases() {
  static const std::vector<SegmentCase> cases = {
      {{"GQA 8 (16:2), two length classes, padding 700/500", 2, 700, 16, 2, 128, 0, {700, 500}},
       {{300, 350, 50}, {37, 463}}},
      {{"MHA, head_dim 64, one-token segments and fillers, odd length 97", 1, 97, 4, 4, 64, 0, {}},
       {{1, 1, 2, 3, 5, 8, 13, 21, 1, 42}}},
      {{"GQA 4, head_dim 64, sliding window 50 inside segments of 30-300", 2, 400, 8, 2, 64, 50, {400, 333}},
       {{30, 300, 70}, {33, 150, 150}}},
      {{"soft-cap 2, GQA 2, head_dim 256, padding 301/211", 2, 301, 4, 2, 256, 0, {301, 211}, 0.f, true, 2.f},
       {{100, 201}, {11, 200}}},
      {{"sinks: GPT-OSS-like 16/2 heads of 64, window 128, segments 100-400",
        1,
        640,
        16,
        2,
        64,
        128,
        {},
        0.f,
        true,
        0.f,
        1.f,
        true},
       {{100, 400, 140}}},
      {{"chunked (Llama 4: ids per chunk, window = chunk 128): 8/1 heads of 128, two examples",
        1,
        600,
        8,
        1,
        128,
        128,
        {}},
       {{128, 128, 44, 128, 128, 44}}},
      {{"a segment of 3000 past tiles of 1024 (the backward tiles the virtual batch), GQA 4",
        1,
        3500,
        8,
        2,
        128,
        0,
        {}},
       {{3000, 500}},
       "1024"},
      {{"segments of 1100 and 2000 in one class past tiles of 512 (their last rows of tiles partly valid, or not at "
        "all: the padded tiles' lengths), GQA 8",
        1,
        3300,
        16,
        2,
        128,
        0,
        {}},
       {{1100, 2000, 200}},
       "512"},
      {{"ALiBi with packed examples (Baichuan 2 with data.packing): 10/10 heads of 128, padding 500/321",
        2,
        500,
        10,
        10,
        128,
        0,
        {500, 321},
        0.f,
        true,
        0.f,
        1.f,
        false,
        true},
       {{200, 260, 40}, {321}}},
      {{"MLA (value head dim 128 of q/k 192, gathered: never ragged): 8/8 heads, padding 600/450",
        2,
        600,
        8,
        8,
        192,
        0,
        {600, 450},
        0.f,
        true,
        0.f,
        1.f,
        false,
        false,
        128},
       {{250, 300, 50}, {200, 250}}},
  };
  return cases;
}

}  // namespace

TEST_CASE("cudnn attention: packed segments and chunks as a virtual batch match the reference",
          "[gpu][attention][cudnn][segments]") {
  MT_REQUIRE_GPU();
  CudnnPerSwitches cudnns;
  REQUIRE(cudnns.current().version() > 0);
  for (const SegmentCase& sc : segment_cases()) {
    const CudnnCase& c = sc.c;
    DYNAMIC_SECTION(c.batch << "x" << c.seq << " " << c.heads << "/" << c.kv_heads << " hd" << c.head_dim << " w"
                            << c.window << " cap" << c.softcap << (c.sinks ? " sinks" : "") << (c.alibi ? " alibi" : "")
                            << " tile" << sc.tile) {
      INFO(c.name);
      const Env tile("MEGATRAIN_CUDNN_BACKWARD_TILE", sc.tile);
      CaseShapes shapes = case_shapes(c);
      const auto seg = segment_shapes(sc, shapes);
      const mt::AttnShape &host = shapes.host, &dev = shapes.dev;
      REQUIRE(mt::cudnn_attention_gap(dev, mt::DType::bf16).empty());
      INFO(seg->layout.groups.size() << " length groups, " << seg->layout.starts.size() << " virtual sequences");
      // What the calls of the backward the environment selects hold is what the plan's formula counts for them,
      // within a reserve that holds the longest call; then every result against the reference.
      const auto check_rows = [&] {
        mt::cuda::CudnnAttention& cudnn = cudnns.current();  // the scope's switches
        int64_t planned = 0;
        for (const mt::SegmentGroup& g : seg->layout.groups) {
          const mt::AttnShape v = cudnn.plan().segment_group_shape(dev, g);
          planned = std::max(planned, cudnn.plan().segment_call_bytes(true, v, v.batch));
        }
        const int64_t need = cudnn.workspace_need(true, dev);
        INFO(cudnn.plan().backward_name() << " workspace: cuDNN " << need << " B, plan " << planned << " B");
        if (backward_refusal(cudnn, dev).empty()) REQUIRE(need > 0);  // else our kernel, unless every group is ragged
        CHECK(need <= planned);
        check_against_reference(cudnn, c, host, dev, 91);
      };
      const auto non_deterministic_rows = [&] {  // never tiled: every group ragged, or gathered
        const Env non_deterministic("MEGATRAIN_ATTENTION_DETERMINISTIC", "0");
        check_rows();
      };
      check_rows();  // the groups as ragged calls, in place (untiled backward)
      non_deterministic_rows();
      const Env gathered("MEGATRAIN_CUDNN_RAGGED", "0");
      check_rows();
      non_deterministic_rows();
    }
  }
}

// Many short segments (one group of 40, rounded up to 64) under workspace limits that hold calls of one and of three
// sequences: forward and backward give the bits of one call, and the calls hold no more than the limit.
TEST_CASE("cudnn attention: packed segments in calls under a workspace limit give one call's bits",
          "[gpu][attention][cudnn][segments]") {
  MT_REQUIRE_GPU();
  std::vector<int32_t> pieces;
  for (int i = 0; i < 40; ++i) pieces.push_back(20 + (i * 7) % 40);
  int32_t len = 0;
  for (const int32_t p : pieces) len += p;
  const SegmentCase sc{{"forty segments", 1, len, 8, 2, 128, 0, {}}, {pieces}};
  CaseShapes shapes = case_shapes(sc.c);
  const auto seg = segment_shapes(sc, shapes);
  const mt::AttnShape &host = shapes.host, &dev = shapes.dev;
  REQUIRE(seg->layout.groups.size() == 1);
  auto cudnn = make_cudnn();
  const mt::AttnShape v = cudnn->plan().segment_group_shape(dev, seg->layout.groups[0]);
  const int64_t T = len, q_size = T * 8 * 128, kv_size = T * 2 * 128, lse_size = 8 * T;
  const auto [q, k, vv, dout] = inputs(q_size, kv_size, 93);
  auto d_q = upload<bf16>(q), d_k = upload<bf16>(k), d_v = upload<bf16>(vv), d_dout = upload<bf16>(dout);
  DeviceBuffer<bf16> out(q_size), dq(q_size), dk(kv_size), dv(kv_size);
  DeviceBuffer<float> lse(lse_size);
  REQUIRE(cudnn->forward(out.get(), lse.get(), d_q->get(), d_k->get(), d_v->get(), dev));
  REQUIRE(cudnn->backward(dq.get(), dk.get(), dv.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(), out.get(),
                          lse.get(), dev));
  const auto whole_out = download(out), whole_lse = download(lse), whole_dq = download(dq), whole_dk = download(dk),
             whole_dv = download(dv);
  const Reference want = reference(q, k, vv, dout, host);
  check_close("one call out", whole_out, want.out, tolerance<bf16>);
  check_close("one call dq", whole_dq, want.dq, tolerance<bf16>);
  for (const int64_t per_call : {1, 3}) {
    INFO(per_call << " a call");
    const int64_t limit = cudnn->plan().segment_call_bytes(true, v, per_call);
    REQUIRE(cudnn->plan().segment_call_batch(true, v, limit) == per_call);
    const int64_t need = cudnn->workspace_need(true, dev, limit);
    REQUIRE(need > 0);
    CHECK(need <= limit);
    CHECK(cudnn->workspace_need(false, dev, limit) <= limit);
    for (auto* buf : {&out, &dq, &dk, &dv}) MT_CUDA_OK(cudaMemsetAsync(buf->get(), 0xff, buf->size() * 2, test_stream()));
    REQUIRE(cudnn->forward(out.get(), lse.get(), d_q->get(), d_k->get(), d_v->get(), dev, limit));
    REQUIRE(cudnn->backward(dq.get(), dk.get(), dv.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(), out.get(),
                            lse.get(), dev, limit));
    CHECK(same_bits(download(out), whole_out));
    CHECK(same_bits(download(lse), whole_lse));
    CHECK(same_bits(download(dq), whole_dq));
    CHECK(same_bits(download(dk), whole_dk));
    CHECK(same_bits(download(dv), whole_dv));
  }
}

// Through the CUDA backend: under MEGATRAIN_ATTENTION=cudnn a segmented call with its virtual batch runs cuDNN (the
// bits CudnnAttention gives directly); without the virtual batch it runs our kernel (its bits).
TEST_CASE("cuda backend attention: packed segments run cuDNN with their virtual batch, ours without",
          "[gpu][attention][cudnn][backend][segments]") {
  MT_REQUIRE_GPU();
  const SegmentCase sc{{"two sequences of packed examples", 2, 300, 8, 2, 128, 0, {300, 250}}, {{120, 180}, {50, 200}}};
  CaseShapes shapes = case_shapes(sc.c);
  const auto seg = segment_shapes(sc, shapes);
  const mt::AttnShape &host = shapes.host, &dev = shapes.dev;
  const int64_t T = 600, q_size = T * 8 * 128, kv_size = T * 2 * 128, lse_size = 2 * 8 * 300;
  const auto [q, k, v, dout] = inputs(q_size, kv_size, 95);
  auto cudnn = make_cudnn();
  auto d_q = upload<bf16>(q), d_k = upload<bf16>(k), d_v = upload<bf16>(v), d_dout = upload<bf16>(dout);
  DeviceBuffer<bf16> out(q_size), dq(q_size), dk(kv_size), dv(kv_size);
  DeviceBuffer<float> lse(lse_size);
  REQUIRE(cudnn->forward(out.get(), lse.get(), d_q->get(), d_k->get(), d_v->get(), dev));
  REQUIRE(cudnn->backward(dq.get(), dk.get(), dv.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(), out.get(),
                          lse.get(), dev));
  const auto cudnn_out = download(out), cudnn_dq = download(dq);
  mt::AttnShape no_batch = dev;
  no_batch.segment_batch = nullptr;
  cu::attention_forward<bf16>(out.get(), lse.get(), d_q->get(), d_k->get(), d_v->get(), no_batch, test_stream());
  cu::attention_backward<bf16>(dq.get(), dk.get(), dv.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(),
                               out.get(), lse.get(), no_batch, test_stream());
  const auto ours_out = download(out), ours_dq = download(dq);
  const Env choice("MEGATRAIN_ATTENTION", "cudnn");
  auto be = mt::make_cuda_backend(mt::DType::bf16, 0, mt::environment_switches());
  for (const bool with_batch : {true, false}) {
    INFO((with_batch ? "with" : "without") << " the virtual batch");
    const mt::DType dt = mt::DType::bf16;
    BackendBuffer b_q(*be, q, dt), b_k(*be, k, dt), b_v(*be, v, dt), b_dout(*be, dout, dt);
    BackendBuffer b_out(*be, q_size, dt), b_dq(*be, q_size, dt), b_dk(*be, kv_size, dt), b_dv(*be, kv_size, dt);
    BackendBuffer b_lse(*be, lse_size, mt::DType::f32);
    const mt::AttnShape s = with_batch ? dev : no_batch;
    be->attention_forward(b_out.get(), b_lse.floats(), b_q.get(), b_k.get(), b_v.get(), s);
    be->attention_backward(b_dq.get(), b_dk.get(), b_dv.get(), b_dout.get(), b_q.get(), b_k.get(), b_v.get(),
                           b_out.get(), b_lse.floats(), s);
    CHECK(same_bits(b_out.read(), with_batch ? cudnn_out : ours_out));
    CHECK(same_bits(b_dq.read(), with_batch ? cudnn_dq : ours_dq));
    const Reference want = reference(q, k, v, dout, host);
    check_close("backend segments out", b_out.read(), want.out, tolerance<bf16>);
    check_close("backend segments dq", b_dq.read(), want.dq, tolerance<bf16>);
  }
}
#endif  // MEGATRAIN_HAVE_CUDNN
