// The cuDNN attention tests' shared rows and checks (see cudnn_attention_cases.h).
#ifdef MEGATRAIN_HAVE_CUDNN
#include "gpu/cudnn_attention_cases.h"

#include <random>
#include <string>
#include <vector>

#include "kernels/ops/kernels.h"
#include "model/alibi.h"
#include "plan/cudnn_attention_plan.h"

namespace mt::test {

namespace cu = mt::cuda;

std::unique_ptr<cu::CudnnAttention> make_cudnn(const RuntimeSwitches& switches) {
  return std::make_unique<cu::CudnnAttention>(
      test_stream(),
      [](int64_t bytes) {
        void* p = nullptr;
        MT_CUDA_OK(cudaMalloc(&p, static_cast<size_t>(bytes)));
        return p;
      },
      [](void* p) { cudaFree(p); }, switches);
}

cu::CudnnAttention& CudnnPerSwitches::current() {
  const RuntimeSwitches now = environment_switches();
  for (auto& [switches, cudnn] : made_)
    if (switches == now) return *cudnn;
  made_.emplace_back(now, make_cudnn(now));
  return *made_.back().second;
}

Inputs inputs(int64_t q_size, int64_t kv_size, uint32_t seed, float magnitude, int64_t v_size, int64_t o_size) {
  return {rounded<bf16>(random_floats(q_size, seed, magnitude)),
          rounded<bf16>(random_floats(kv_size, seed + 1, magnitude)),
          rounded<bf16>(random_floats(v_size < 0 ? kv_size : v_size, seed + 2)),
          rounded<bf16>(random_floats(o_size < 0 ? q_size : o_size, seed + 3))};
}

Reference reference(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                    const std::vector<float>& dout, const mt::AttnShape& host) {
  Reference r{std::vector<float>(dout.size()),
              std::vector<float>(static_cast<size_t>(host.batch * host.n_heads * host.seq)),
              std::vector<float>(q.size()), std::vector<float>(k.size()), std::vector<float>(v.size()), {}};
  cpu().attention_forward(r.out.data(), r.lse.data(), q.data(), k.data(), v.data(), host);
  cpu().attention_backward(r.dq.data(), r.dk.data(), r.dv.data(), dout.data(), q.data(), k.data(), v.data(),
                           r.out.data(), r.lse.data(), host);
  if (host.sinks != nullptr) {
    r.d_sinks.assign(static_cast<size_t>(host.n_heads), 0.f);
    cpu().attention_sinks_backward(r.d_sinks.data(), dout.data(), r.out.data(), r.lse.data(), host);
  }
  return r;
}

std::vector<float> sinks_gradient(const DeviceBuffer<bf16>& dout, const DeviceBuffer<bf16>& out,
                                  const DeviceBuffer<float>& lse, const mt::AttnShape& dev) {
  DeviceBuffer<float> grad(static_cast<size_t>(dev.n_heads));
  MT_CUDA_OK(cudaMemsetAsync(grad.get(), 0, grad.size() * sizeof(float), test_stream()));
  cu::attention_sinks_backward<bf16>(grad.get(), dout.get(), out.get(), lse.get(), dev, test_stream());
  return download(grad);
}

Reference through_backend(mt::Backend& be, const std::vector<float>& q, const std::vector<float>& k,
                          const std::vector<float>& v, const std::vector<float>& dout, const mt::AttnShape& host,
                          const std::vector<int32_t>& lens) {
  const mt::DType dt = mt::DType::bf16;
  const auto q_size = static_cast<int64_t>(q.size()), kv_size = static_cast<int64_t>(k.size());
  const auto v_size = static_cast<int64_t>(v.size()), o_size = static_cast<int64_t>(dout.size());
  BackendBuffer b_q(be, q, dt), b_k(be, k, dt), b_v(be, v, dt), b_dout(be, dout, dt);
  BackendBuffer out(be, o_size, dt), dq(be, q_size, dt), dk(be, kv_size, dt), dv(be, v_size, dt);
  BackendBuffer lse(be, host.batch * host.n_heads * host.seq, mt::DType::f32);
  const Ints b_lens(be, lens);
  mt::AttnShape dev = host;
  dev.seq_lens = b_lens.p;
  be.attention_forward(out.get(), lse.floats(), b_q.get(), b_k.get(), b_v.get(), dev);
  be.attention_backward(dq.get(), dk.get(), dv.get(), b_dout.get(), b_q.get(), b_k.get(), b_v.get(), out.get(),
                        lse.floats(), dev);
  return {out.read(), lse.read(), dq.read(), dk.read(), dv.read(), {}};
}

CaseShapes case_shapes(const CudnnCase& c) {
  const mt::AttnShape host{.batch = c.batch,
                           .seq = c.seq,
                           .n_heads = c.heads,
                           .n_kv_heads = c.kv_heads,
                           .head_dim = c.head_dim,
                           .v_head_dim = c.v_head_dim,
                           .window = c.window,
                           .scale = c.scale,
                           .softcap = c.softcap,
                           .seq_lens = c.seq_lens.empty() ? nullptr : c.seq_lens.data()};
  CaseShapes s{host, host, upload_ints(c.seq_lens.empty() ? std::vector<int32_t>{0} : c.seq_lens), {}, {}, nullptr,
               nullptr};
  s.dev.seq_lens = host.seq_lens != nullptr ? s.lens->get() : nullptr;
  if (c.sinks) {
    std::mt19937 rng(37);
    std::uniform_real_distribution<float> logit(0.f, 2.f);
    for (int64_t h = 0; h < c.heads; ++h) s.sinks.push_back(logit(rng));
    s.sinks = rounded<bf16>(s.sinks);
    s.dev_sinks = upload<bf16>(s.sinks);
    s.host.sinks = s.sinks.data();
    s.dev.sinks = s.dev_sinks->get();
  }
  if (c.alibi) {
    s.slopes = mt::alibi_slopes(c.heads);
    s.dev_slopes = upload<float>(s.slopes);
    s.host.alibi_slopes = s.slopes.data();
    s.dev.alibi_slopes = s.dev_slopes->get();
  }
  return s;
}

const std::vector<CudnnCase>& cudnn_cases() {
  static const std::vector<CudnnCase> cases = {
      {"GQA 8 (16:2 as Qwen2.5), head_dim 128", 1, 256, 16, 2, 128, 0, {}},
      {"MHA, odd length 77, head_dim 64", 2, 77, 4, 4, 64, 0, {}},
      {"GQA 4, odd length 333, padding with a length-1 sequence, head_dim 128", 3, 333, 8, 2, 128, 0, {333, 200, 1}},
      {"MQA, padded 1000/617, head_dim 128", 2, 1000, 4, 1, 128, 0, {1000, 617}},
      {"GQA 2, sliding window 100, odd length 601, head_dim 128", 1, 601, 4, 2, 128, 100, {}},
      {"GQA 4, window 37, padding 130/100, head_dim 64", 2, 130, 8, 2, 64, 37, {130, 100}},
      {"GQA 2, scale 1/12, length 200, head_dim 128", 1, 200, 4, 2, 128, 0, {}, 1.f / 12.f},
      {"GQA 8 long, length 1024, head_dim 128", 1, 1024, 16, 2, 128, 0, {}},
      {"GQA 8, length 512 (a bucket: run in place), padded 512/300, head_dim 128", 2, 512, 16, 2, 128, 0, {512, 300}},
      {"MHA, length 192 (a bucket, not a multiple of 128), head_dim 64", 1, 192, 2, 2, 64, 0, {}},
      {"GQA 2, head_dim 256, padding 300/211", 2, 300, 4, 2, 256, 0, {300, 211}, 0.f, false},
      {"MHA, head_dim 256, padding 300/199", 2, 300, 2, 2, 256, 0, {300, 199}, 0.f, false},
      // Soft-capped (Gemma 2). Scores are about N(0, 1) at the default scale: a cap of 1 or 2 bends them hard, so the
      // tanh and its derivative show; the Gemma-2-9B rows have its real cap 50 and scale 1/16 (query_pre_attn_scalar)
      // with q and k of std 3, so that the logits (std 9) reach the cap's non-linear range.
      {"soft-cap 1, GQA 2, head_dim 256, sliding window 100, odd length 333", 1, 333, 4, 2, 256, 100, {}, 0.f, true,
       1.f},
      {"soft-cap 2, GQA 4, head_dim 128, odd length 301, padding 301/211", 2, 301, 8, 2, 128, 0, {301, 211}, 0.f,
       true, 2.f},
      {"soft-cap 1, MQA, head_dim 64, window 37, padding 130/100", 2, 130, 4, 1, 64, 37, {130, 100}, 0.f, true, 1.f},
      {"soft-cap 2, MHA, head_dim 256, length 256 (a bucket, in place)", 1, 256, 2, 2, 256, 0, {}, 0.f, true, 2.f},
      {"Gemma-2-9B layer (half its heads): soft-cap 50, scale 1/16, GQA 2, head_dim 256, length 1024, window 4096",
       1, 1024, 8, 4, 256, 4096, {}, 1.f / 16.f, true, 50.f, 3.f},
      {"Gemma-2-9B sliding layer: soft-cap 50, scale 1/16, 16:8, head_dim 256, window 300 of odd length 701", 1, 701,
       16, 8, 256, 300, {}, 1.f / 16.f, true, 50.f, 3.f},
      {"long: MQA, window 4096 (one graph: windows do not tile) of 16384, head_dim 128", 1, 16384, 2, 1, 128, 4096,
       {}},
      // GPT-OSS's attention sinks (its layers: 64/8 heads of 64, full or a 128-token window; fewer heads here).
      {"sinks: GPT-OSS-like 16/2 heads of 64, causal, length 256 (a bucket, in place)", 1, 256, 16, 2, 64, 0, {}, 0.f,
       true, 0.f, 1.f, true},
      {"sinks: 8/1 heads of 64, sliding window 128, odd length 333", 1, 333, 8, 1, 64, 128, {}, 0.f, true, 0.f, 1.f,
       true},
      {"sinks: 16/2 heads of 64, window 128, padded 300/171", 2, 300, 16, 2, 64, 128, {300, 171}, 0.f, true, 0.f, 1.f,
       true},
      {"sinks: 8/1 heads of 64, causal, padded 513/200/1 (staged)", 3, 513, 8, 1, 64, 0, {513, 200, 1}, 0.f, true,
       0.f, 1.f, true},
      // Baichuan 2's ALiBi (13B: 40 heads of 128, MHA, no RoPE; fewer heads here, and GQA and windows beyond it).
      {"ALiBi: Baichuan-2-13B-like 10/10 heads of 128, odd length 333, padded 333/200", 2, 333, 10, 10, 128, 0,
       {333, 200}, 0.f, true, 0.f, 1.f, false, true},
      {"ALiBi: 8/8 heads of 128, length 1024 (a bucket, in place)", 1, 1024, 8, 8, 128, 0, {}, 0.f, true, 0.f, 1.f,
       false, true},
      {"ALiBi: GQA 4, head_dim 64, window 64, odd length 201", 1, 201, 8, 2, 64, 64, {}, 0.f, true, 0.f, 1.f, false,
       true},
      // Latent attention (DeepSeek-V3: 128 heads, q/k 192 = 128 no-rope + 64 rope, value 128, scale with YaRN's
      // mscale; fewer heads here): V, O and their gradients at the value head dim.
      {"MLA: DeepSeek-V3-like 8 heads, q/k 192, value 128, odd length 333, padded 333/200 (staged)", 2, 333, 8, 8, 192,
       0, {333, 200}, 0.1147f, true, 0.f, 1.f, false, false, 128},
      {"MLA: 16 heads, q/k 192, value 128, length 1024 (a bucket, in place)", 1, 1024, 16, 16, 192, 0, {}, 0.f, true,
       0.f, 1.f, false, false, 128},
      {"MLA: DeepSeek-V2-Lite-like 4 heads, q/k 192, value 128, length 512 padded 512/77", 2, 512, 4, 4, 192, 0,
       {512, 77}, 0.f, true, 0.f, 1.f, false, false, 128},
  };
  return cases;
}

int64_t nonzero_padding(const std::vector<float>& v, const CudnnCase& c, int64_t row_width) {
  int64_t bad = 0;
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t len = c.seq_lens.empty() ? c.seq : c.seq_lens[b];
    for (int64_t i = len; i < c.seq; ++i)
      for (int64_t e = 0; e < row_width; ++e) bad += v[(b * c.seq + i) * row_width + e] != 0.f;
  }
  return bad;
}

std::string backward_refusal(cu::CudnnAttention& cudnn, const mt::AttnShape& dev) {
  const auto refused = [&](mt::AttnShape g) {  // g at its graph's length: the tile's, or its bucket
    const int64_t tile = cudnn.plan().backward_tile(g);
    g.seq = tile > 0 ? tile : cudnn.plan().seq_bucket(g.seq);
    return mt::cudnn_frontend_gap(g, true, false, cudnn.version());
  };
  if (dev.segment_batch == nullptr) return refused(dev);
  for (const mt::SegmentGroup& g : dev.segment_batch->groups)
    if (std::string why = refused(cudnn.plan().segment_group_shape(dev, g)); !why.empty()) return why;
  return "";
}

void check_against_reference(cu::CudnnAttention& cudnn, const CudnnCase& c, const mt::AttnShape& host,
                             const mt::AttnShape& dev, uint32_t seed) {
  const int64_t T = c.batch * c.seq, q_size = T * c.heads * c.head_dim, kv_size = T * c.kv_heads * c.head_dim;
  const int64_t o_size = T * c.heads * c.value_head_dim(), v_size = T * c.kv_heads * c.value_head_dim();
  const int64_t lse_size = c.batch * c.heads * c.seq;
  const auto [q, k, v, dout] = inputs(q_size, kv_size, seed, c.magnitude, v_size, o_size);
  const Reference want = reference(q, k, v, dout, host);

  auto d_q = upload<bf16>(q), d_k = upload<bf16>(k), d_v = upload<bf16>(v), d_dout = upload<bf16>(dout);
  DeviceBuffer<bf16> out(o_size), dq(q_size), dk(kv_size), dv(v_size), dq2(q_size), dk2(kv_size), dv2(v_size);
  DeviceBuffer<bf16> out_ours(o_size), dq3(q_size), dk3(kv_size), dv3(v_size), dq4(q_size), dk4(kv_size),
      dv4(v_size);
  DeviceBuffer<float> lse(lse_size), lse_ours(lse_size);
  for (auto* buf : {&out, &dq, &dk, &dv})  // NaN bits: every row the calls should write, and the padding
    MT_CUDA_OK(cudaMemsetAsync(buf->get(), 0xff, buf->size() * 2, test_stream()));
  REQUIRE(cudnn.forward(out.get(), lse.get(), d_q->get(), d_k->get(), d_v->get(), dev));
  // The backward the dispatch runs: cuDNN's, or where it refuses the call (cudnn-frontend's refusal alone,
  // backward_refusal) ours, after cuDNN's backward has said so and written nothing.
  const bool cudnn_backward = cudnn.workspace_need(true, dev) >= 0;
  const std::string refusal = backward_refusal(cudnn, dev);
  INFO("cuDNN's backward " << (cudnn_backward ? "runs" : "is refused") << "; cudnn-frontend's refusal: " << refusal);
  if (!cudnn_backward) REQUIRE_FALSE(refusal.empty());
  const auto backward = [&](DeviceBuffer<bf16>& gq, DeviceBuffer<bf16>& gk, DeviceBuffer<bf16>& gv,
                            const DeviceBuffer<bf16>& o, const DeviceBuffer<float>& l) {
    const bool ran = cudnn.backward(gq.get(), gk.get(), gv.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(),
                                    o.get(), l.get(), dev);
    REQUIRE(ran == cudnn_backward);
    if (!ran)
      cu::attention_backward<bf16>(gq.get(), gk.get(), gv.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(),
                                   o.get(), l.get(), dev, test_stream());
  };
  backward(dq, dk, dv, out, lse);
  backward(dq2, dk2, dv2, out, lse);
  // Our kernel's forward, then cuDNN's backward from its lse: the two implementations pair.
  cu::attention_forward<bf16>(out_ours.get(), lse_ours.get(), d_q->get(), d_k->get(), d_v->get(), dev,
                              test_stream());
  backward(dq3, dk3, dv3, out_ours, lse_ours);
  // cuDNN's forward, then our kernel's backward from its out and lse: the other pairing.
  cu::attention_backward<bf16>(dq4.get(), dk4.get(), dv4.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(),
                               out.get(), lse.get(), dev, test_stream());
  const auto got_out = download(out), got_dq = download(dq), got_dk = download(dk), got_dv = download(dv);
  check_close("cudnn attention out", got_out, want.out, tolerance<bf16>);
  check_close("cudnn attention lse", download(lse), want.lse, 1e-4);
  check_close("cudnn attention dq", got_dq, want.dq, tolerance<bf16>);
  check_close("cudnn attention dk", got_dk, want.dk, tolerance<bf16>);
  check_close("cudnn attention dv", got_dv, want.dv, tolerance<bf16>);
  CHECK(nonzero_padding(got_out, c, c.heads * c.value_head_dim()) == 0);
  CHECK(nonzero_padding(got_dq, c, c.heads * c.head_dim) == 0);
  CHECK(nonzero_padding(got_dk, c, c.kv_heads * c.head_dim) == 0);
  CHECK(nonzero_padding(got_dv, c, c.kv_heads * c.value_head_dim()) == 0);
  if (cudnn.plan().deterministic_backward()) {
    CHECK(same_bits(got_dq, download(dq2)));
    CHECK(same_bits(got_dk, download(dk2)));
    CHECK(same_bits(got_dv, download(dv2)));
  }
  check_close("cudnn backward from our lse: dq", download(dq3), want.dq, tolerance<bf16>);
  check_close("cudnn backward from our lse: dk", download(dk3), want.dk, tolerance<bf16>);
  check_close("cudnn backward from our lse: dv", download(dv3), want.dv, tolerance<bf16>);
  check_close("our backward from cudnn's lse: dq", download(dq4), want.dq, tolerance<bf16>);
  check_close("our backward from cudnn's lse: dk", download(dk4), want.dk, tolerance<bf16>);
  check_close("our backward from cudnn's lse: dv", download(dv4), want.dv, tolerance<bf16>);
  check_close("our lse against cudnn's", download(lse_ours), download(lse), 1e-4);
  if (c.sinks)
    check_close("d_sinks from cudnn's out and lse", sinks_gradient(*d_dout, out, lse, dev), want.d_sinks,
                tolerance<bf16>);
}

std::unique_ptr<SegmentShapes> segment_shapes(const SegmentCase& sc, CaseShapes& shapes) {
  const CudnnCase& c = sc.c;
  auto s = std::make_unique<SegmentShapes>();
  s->ids.assign(static_cast<size_t>(c.batch * c.seq), -1);
  for (int64_t b = 0; b < c.batch; ++b) {
    int64_t at = 0;
    for (size_t p = 0; p < sc.pieces[static_cast<size_t>(b)].size(); ++p)
      for (int32_t i = 0; i < sc.pieces[static_cast<size_t>(b)][p]; ++i)
        s->ids[static_cast<size_t>(b * c.seq + at++)] = static_cast<int32_t>(p);
    REQUIRE(at == (c.seq_lens.empty() ? c.seq : c.seq_lens[static_cast<size_t>(b)]));
  }
  s->layout = mt::segment_batch_layout(s->ids.data(), c.seq_lens.empty() ? nullptr : c.seq_lens.data(), c.batch, c.seq);
  s->d_ids = upload_ints(s->ids);
  s->d_starts = upload_ints(s->layout.starts);
  s->d_lens = upload_ints(s->layout.lens);
  s->batch.groups = s->layout.groups;
  s->batch.starts = s->d_starts->get();
  s->batch.lens = s->d_lens->get();
  shapes.host.segments = s->ids.data();
  shapes.dev.segments = s->d_ids->get();
  shapes.dev.segment_batch = &s->batch;
  return s;
}

}  // namespace mt::test
#endif  // MEGATRAIN_HAVE_CUDNN
