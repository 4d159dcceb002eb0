// cuDNN's fused attention (src/backend/cuda/cudnn_attention.h) against the CPU reference: a table of rows (lengths
// odd and even, GQA ratios, padding, windows, scale, soft-cap, GPT-OSS's sinks, ALiBi, head_dim 64/128/256), bf16
// inputs rounded first and compared with the fp32 reference of the rounded inputs, forward and the deterministic
// backward (run twice: bit for bit; with sinks, d_sinks from cuDNN's out and lse as well) and the non-deterministic one
// (MEGATRAIN_ATTENTION_DETERMINISTIC=0: within tolerance and its workspace formula, ragged and padded), padded rows
// exactly 0, each implementation's forward paired with the other's backward (the lse convention is shared), the
// plan's workspace formula never below cuDNN's; the CUDA backend's MEGATRAIN_ATTENTION dispatch, auto per direction
// against the reserved workspace (a soft-capped layer too); packed segments and chunks as their virtual batch; and, as
// hidden cases, the probes the coordinator runs on the GPU machine ("[.attention_bench]": plans, engines and
// ours-vs-cuDNN TFLOP/s at the issue's shapes and Gemma-2-9B's, and at packed shapes).
#ifdef MEGATRAIN_HAVE_CUDNN
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/segment_batch.h"
#include "backend/cuda/cudnn_attention.h"
#include "plan/cudnn_attention_plan.h"
#include "gpu/gpu_test_util.h"
#include "kernels/kernels.h"
#include "model/alibi.h"

namespace {

using namespace mt::test;
namespace cu = mt::cuda;
using bf16 = __nv_bfloat16;

// A CudnnAttention on the tests' stream whose workspace comes from cudaMalloc.
std::unique_ptr<cu::CudnnAttention> make_cudnn() {
  return std::make_unique<cu::CudnnAttention>(
      test_stream(),
      [](int64_t bytes) {
        void* p = nullptr;
        MT_CUDA_OK(cudaMalloc(&p, static_cast<size_t>(bytes)));
        return p;
      },
      [](void* p) { cudaFree(p); });
}

// One attention call's inputs rounded to bf16: q and k of `magnitude`, v and dout, from seeds seed .. seed + 3.
struct Inputs {
  std::vector<float> q, k, v, dout;
};
Inputs inputs(int64_t q_size, int64_t kv_size, uint32_t seed, float magnitude = 1.f) {
  return {rounded<bf16>(random_floats(q_size, seed, magnitude)),
          rounded<bf16>(random_floats(kv_size, seed + 1, magnitude)), rounded<bf16>(random_floats(kv_size, seed + 2)),
          rounded<bf16>(random_floats(q_size, seed + 3))};
}

// The CPU reference's forward (out, lse) and backward (dq, dk, dv; d_sinks where the shape has sinks) of one
// attention call on host data.
struct Reference {
  std::vector<float> out, lse, dq, dk, dv, d_sinks;
};
Reference reference(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                    const std::vector<float>& dout, const mt::AttnShape& host) {
  Reference r{std::vector<float>(q.size()), std::vector<float>(static_cast<size_t>(host.batch * host.n_heads * host.seq)),
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

// The sinks' gradient on the GPU (the CUDA backend's attention_sinks_backward) from a forward's out and lse.
std::vector<float> sinks_gradient(const DeviceBuffer<bf16>& dout, const DeviceBuffer<bf16>& out,
                                  const DeviceBuffer<float>& lse, const mt::AttnShape& dev) {
  DeviceBuffer<float> grad(static_cast<size_t>(dev.n_heads));
  MT_CUDA_OK(cudaMemsetAsync(grad.get(), 0, grad.size() * sizeof(float), test_stream()));
  cu::attention_sinks_backward<bf16>(grad.get(), dout.get(), out.get(), lse.get(), dev, test_stream());
  return download(grad);
}

// One forward and backward through a Backend's attention ops (bf16), host data in and out; the shape's seq_lens
// (host memory) are uploaded for the call.
Reference through_backend(mt::Backend& be, const std::vector<float>& q, const std::vector<float>& k,
                          const std::vector<float>& v, const std::vector<float>& dout, const mt::AttnShape& host,
                          const std::vector<int32_t>& lens) {
  const mt::DType dt = mt::DType::bf16;
  const auto q_size = static_cast<int64_t>(q.size()), kv_size = static_cast<int64_t>(k.size());
  BackendBuffer b_q(be, q, dt), b_k(be, k, dt), b_v(be, v, dt), b_dout(be, dout, dt);
  BackendBuffer out(be, q_size, dt), dq(be, q_size, dt), dk(be, kv_size, dt), dv(be, kv_size, dt);
  BackendBuffer lse(be, host.batch * host.n_heads * host.seq, mt::DType::f32);
  const Ints b_lens(be, lens);
  mt::AttnShape dev = host;
  dev.seq_lens = b_lens.p;
  be.attention_forward(out.get(), lse.floats(), b_q.get(), b_k.get(), b_v.get(), dev);
  be.attention_backward(dq.get(), dk.get(), dv.get(), b_dout.get(), b_q.get(), b_k.get(), b_v.get(), out.get(),
                        lse.floats(), dev);
  return {out.read(), lse.read(), dq.read(), dk.read(), dv.read(), {}};
}

// Sets an environment variable for one scope.
struct Env {
  const char* name;
  Env(const char* n, const char* value) : name(n) { setenv(n, value, 1); }
  ~Env() { unsetenv(name); }
};

struct CudnnCase {
  const char* name;
  int64_t batch, seq, heads, kv_heads, head_dim, window;
  std::vector<int32_t> seq_lens;  // empty: all valid
  float scale = 0.f;
  bool required = true;  // the plan must finalize (false: head_dim 256, where the engine may refuse: then skipped)
  float softcap = 0.f;   // Gemma 2's logit soft-cap (the graph's score modifier); 0 = none
  float magnitude = 1.f;  // std of the random q and k (larger: logits reach the soft-cap's non-linear range)
  bool sinks = false;     // GPT-OSS's attention sinks: a logit per head, uniform in [0, 2] (bf16)
  bool alibi = false;     // Baichuan 2's ALiBi: model/alibi.h's slopes for the heads (fp32)
};

// A case's shape with its lengths (and sinks) in host memory (for the reference) and uploaded (for the GPU); empty
// lengths: none.
struct CaseShapes {
  mt::AttnShape host, dev;
  std::unique_ptr<DeviceBuffer<int32_t>> lens;
  std::vector<float> sinks, slopes;
  std::unique_ptr<DeviceBuffer<bf16>> dev_sinks;
  std::unique_ptr<DeviceBuffer<float>> dev_slopes;
};
CaseShapes case_shapes(const CudnnCase& c) {
  const mt::AttnShape host{.batch = c.batch,
                           .seq = c.seq,
                           .n_heads = c.heads,
                           .n_kv_heads = c.kv_heads,
                           .head_dim = c.head_dim,
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

// One case's forward and backward on cuDNN against the CPU reference (inputs from seed): out, lse and the gradients
// within bf16 tolerance, padded rows exactly 0 (the outputs start as NaN bits), the deterministic backward bit for bit
// on a repeat, each implementation's forward paired with the other's backward, and with sinks d_sinks from cuDNN's
// out and lse.
void check_against_reference(cu::CudnnAttention& cudnn, const CudnnCase& c, const mt::AttnShape& host,
                             const mt::AttnShape& dev, uint32_t seed) {
  const int64_t T = c.batch * c.seq, q_size = T * c.heads * c.head_dim, kv_size = T * c.kv_heads * c.head_dim;
  const int64_t lse_size = c.batch * c.heads * c.seq;
  const auto [q, k, v, dout] = inputs(q_size, kv_size, seed, c.magnitude);
  const Reference want = reference(q, k, v, dout, host);

  auto d_q = upload<bf16>(q), d_k = upload<bf16>(k), d_v = upload<bf16>(v), d_dout = upload<bf16>(dout);
  DeviceBuffer<bf16> out(q_size), dq(q_size), dk(kv_size), dv(kv_size), dq2(q_size), dk2(kv_size), dv2(kv_size);
  DeviceBuffer<bf16> out_ours(q_size), dq3(q_size), dk3(kv_size), dv3(kv_size), dq4(q_size), dk4(kv_size),
      dv4(kv_size);
  DeviceBuffer<float> lse(lse_size), lse_ours(lse_size);
  for (auto* buf : {&out, &dq, &dk, &dv})  // NaN bits: every row the calls should write, and the padding
    MT_CUDA_OK(cudaMemsetAsync(buf->get(), 0xff, buf->size() * 2, test_stream()));
  REQUIRE(cudnn.forward(out.get(), lse.get(), d_q->get(), d_k->get(), d_v->get(), dev));
  REQUIRE(cudnn.backward(dq.get(), dk.get(), dv.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(),
                          out.get(), lse.get(), dev));
  REQUIRE(cudnn.backward(dq2.get(), dk2.get(), dv2.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(),
                          out.get(), lse.get(), dev));
  // Our kernel's forward, then cuDNN's backward from its lse: the two implementations pair.
  cu::attention_forward<bf16>(out_ours.get(), lse_ours.get(), d_q->get(), d_k->get(), d_v->get(), dev,
                              test_stream());
  REQUIRE(cudnn.backward(dq3.get(), dk3.get(), dv3.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(),
                          out_ours.get(), lse_ours.get(), dev));
  // cuDNN's forward, then our kernel's backward from its out and lse: the other pairing.
  cu::attention_backward<bf16>(dq4.get(), dk4.get(), dv4.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(),
                               out.get(), lse.get(), dev, test_stream());
  const auto got_out = download(out), got_dq = download(dq), got_dk = download(dk), got_dv = download(dv);
  check_close("cudnn attention out", got_out, want.out, tolerance<bf16>);
  check_close("cudnn attention lse", download(lse), want.lse, 1e-4);
  check_close("cudnn attention dq", got_dq, want.dq, tolerance<bf16>);
  check_close("cudnn attention dk", got_dk, want.dk, tolerance<bf16>);
  check_close("cudnn attention dv", got_dv, want.dv, tolerance<bf16>);
  CHECK(nonzero_padding(got_out, c, c.heads * c.head_dim) == 0);
  CHECK(nonzero_padding(got_dq, c, c.heads * c.head_dim) == 0);
  CHECK(nonzero_padding(got_dk, c, c.kv_heads * c.head_dim) == 0);
  CHECK(nonzero_padding(got_dv, c, c.kv_heads * c.head_dim) == 0);
  if (mt::cudnn_deterministic_backward()) {
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

}  // namespace

TEST_CASE("cudnn attention forward and backward (deterministic or not) match the reference",
          "[gpu][attention][cudnn]") {
  MT_REQUIRE_GPU();
  auto cudnn = make_cudnn();
  INFO("cuDNN version " << cudnn->version());
  REQUIRE(cudnn->version() > 0);
  for (const CudnnCase& c : cudnn_cases()) {
    // Short section names: Catch2's console reporter throws while wrapping a failure under a long one.
    DYNAMIC_SECTION(c.batch << "x" << c.seq << " " << c.heads << "/" << c.kv_heads << " hd" << c.head_dim << " w"
                            << c.window << " cap" << c.softcap << (c.sinks ? " sinks" : "") << (c.alibi ? " alibi" : "")) {
      INFO(c.name);
      const CaseShapes shapes = case_shapes(c);
      const mt::AttnShape &host = shapes.host, &dev = shapes.dev;
      REQUIRE(mt::cudnn_attention_gap(dev, mt::DType::bf16).empty());

      const mt::cuda::CudnnPlanInfo fwd = cudnn->plan_info(false, dev), bwd = cudnn->plan_info(true, dev);
      INFO("forward plan: " << (fwd.ok ? "engine " + std::to_string(fwd.engine) : fwd.error));
      INFO("backward plan: " << (bwd.ok ? "engine " + std::to_string(bwd.engine) : bwd.error));
      if (!c.required && !(fwd.ok && bwd.ok)) {
        WARN("cuDNN refused an optional row (" << c.name << "): " << fwd.error << " " << bwd.error);
        return;
      }
      REQUIRE(fwd.ok);
      REQUIRE(bwd.ok);
      // The memory plan's figure (plan/cudnn_attention_plan.h) never under-counts what this cuDNN asks for.
      const int64_t bucket = mt::cudnn_seq_bucket(c.seq);
      const int64_t planned = mt::cudnn_backward_graph_bytes(c.batch, bucket, c.heads, c.head_dim);
      INFO("backward workspace: cuDNN " << bwd.workspace_bytes << " B, plan " << planned << " B");
      CHECK(fwd.workspace_bytes <= mt::kCudnnGraphUnit);
      CHECK(bwd.workspace_bytes <= planned);
      // A staged batch's ragged backward holds less than its staging (the default); the padded graph holds both.
      CHECK(cudnn->workspace_need(true, dev) > 0);
      CHECK(cudnn->workspace_need(true, dev) <= planned + mt::cudnn_staging_bytes(true, dev));

      // The non-deterministic backward (MEGATRAIN_ATTENTION_DETERMINISTIC=0): within the plan's formula for it and
      // the reference's tolerance. Where its graph does not finalize, training runs our backward.
      const auto non_deterministic_rows = [&] {
        const Env non_deterministic("MEGATRAIN_ATTENTION_DETERMINISTIC", "0");
        const mt::cuda::CudnnPlanInfo nd = cudnn->plan_info(true, dev, false);
        const int64_t planned_nd = mt::cudnn_backward_graph_bytes(c.batch, bucket, c.heads, c.head_dim);
        const int64_t staging = mt::cudnn_staging_bytes(true, dev), need = cudnn->workspace_need(true, dev);
        INFO("non-deterministic backward workspace: cuDNN " << nd.workspace_bytes << " B, plan " << planned_nd
                                                            << " B, held " << need << " B");
        if (!nd.ok) {
          WARN("cuDNN's non-deterministic backward does not finalize (" << c.name << "): " << nd.error);
          return;
        }
        CHECK(nd.workspace_bytes <= planned_nd);
        CHECK(need > 0);
        if (mt::cudnn_ragged())
          CHECK(need <= planned_nd + staging);  // a staged batch's ragged call holds its graph and the lse
        else
          CHECK(need == nd.workspace_bytes + staging);
        check_against_reference(*cudnn, c, host, dev, 31);
      };

      check_against_reference(*cudnn, c, host, dev, 31);  // the ragged forward (and a staged batch's backward)
      non_deterministic_rows();
      const Env padded_graph("MEGATRAIN_CUDNN_RAGGED", "0");
      CHECK(cudnn->workspace_need(true, dev) == bwd.workspace_bytes + mt::cudnn_staging_bytes(true, dev));
      check_against_reference(*cudnn, c, host, dev, 31);
      non_deterministic_rows();
    }
  }
}

// The deterministic backward in tiles (plan/cudnn_attention_plan.h: cudnn_backward_tile), with tiles made short by
// MEGATRAIN_CUDNN_BACKWARD_TILE so that a few thousand tokens run several rows of them: against the reference (the
// forward before it too, and d_sinks with sinks), bit for bit on a repeat, padded rows 0, near the one-graph
// backward, and within the plan's workspace formula.
namespace {

struct TiledCase {
  CudnnCase c;  // no window (windows run as one graph), default scale
  const char* tile;
  int64_t want_tile;
};

void check_tiled_backward(const std::vector<TiledCase>& cases) {
  MT_REQUIRE_GPU();
  auto cudnn = make_cudnn();
  REQUIRE(cudnn->version() > 0);
  for (const auto& [c, tile, want_tile] : cases) {
    DYNAMIC_SECTION(c.batch << "x" << c.seq << " " << c.heads << "/" << c.kv_heads << " hd" << c.head_dim << " tile"
                            << tile << (c.sinks ? " sinks" : "")) {
      INFO(c.name);
      const int64_t T = c.batch * c.seq, q_size = T * c.heads * c.head_dim, kv_size = T * c.kv_heads * c.head_dim;
      const CaseShapes shapes = case_shapes(c);
      const mt::AttnShape &host = shapes.host, &dev = shapes.dev;
      const auto [q, k, v, dout] = inputs(q_size, kv_size, 81, c.magnitude);
      const Reference want = reference(q, k, v, dout, host);
      auto d_q = upload<bf16>(q), d_k = upload<bf16>(k), d_v = upload<bf16>(v), d_dout = upload<bf16>(dout);
      DeviceBuffer<bf16> out(q_size), dq(q_size), dk(kv_size), dv(kv_size), dq2(q_size), dk2(kv_size), dv2(kv_size);
      DeviceBuffer<bf16> dq1(q_size), dk1(kv_size), dv1(kv_size);
      DeviceBuffer<float> lse(c.batch * c.heads * c.seq);
      REQUIRE(cudnn->forward(out.get(), lse.get(), d_q->get(), d_k->get(), d_v->get(), dev));
      check_close("cudnn forward out", download(out), want.out, tolerance<bf16>);
      check_close("cudnn forward lse", download(lse), want.lse, 1e-4);
      if (c.sinks)
        check_close("d_sinks from cudnn's out and lse", sinks_gradient(*d_dout, out, lse, dev), want.d_sinks,
                    tolerance<bf16>);
      {
        const Env whole("MEGATRAIN_CUDNN_BACKWARD_TILE", "0");
        REQUIRE(mt::cudnn_backward_tile(dev) == 0);
        REQUIRE(cudnn->backward(dq1.get(), dk1.get(), dv1.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(),
                                out.get(), lse.get(), dev));
      }
      const Env tiles("MEGATRAIN_CUDNN_BACKWARD_TILE", tile);
      REQUIRE(mt::cudnn_backward_tile(dev) == want_tile);
      const int64_t need = cudnn->workspace_need(true, dev);
      const int64_t planned = mt::cudnn_tiled_backward_bytes(dev, want_tile);
      INFO("tiled backward workspace: " << need << " B, plan " << planned << " B");
      REQUIRE(need > 0);
      CHECK(need <= planned);
      REQUIRE(cudnn->backward(dq.get(), dk.get(), dv.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(),
                              out.get(), lse.get(), dev));
      REQUIRE(cudnn->backward(dq2.get(), dk2.get(), dv2.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(),
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
      CHECK(nonzero_padding(got_dv, c, c.kv_heads * c.head_dim) == 0);
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
        const int64_t limit = mt::cudnn_backward_call_bytes(dev, per_call);
        REQUIRE(mt::cudnn_backward_batch(dev, limit) == per_call);
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

TEST_CASE("cuda backend attention: MEGATRAIN_ATTENTION=cudnn and =ours both match the reference",
          "[gpu][attention][cudnn][backend]") {
  MT_REQUIRE_GPU();
  const int64_t batch = 2, seq = 129, heads = 8, kv_heads = 2, head_dim = 128, T = batch * seq;
  const int64_t q_size = T * heads * head_dim, kv_size = T * kv_heads * head_dim;
  const std::vector<int32_t> lens{129, 70};
  const auto [q, k, v, dout] = inputs(q_size, kv_size, 41);
  mt::AttnShape host{.batch = batch, .seq = seq, .n_heads = heads, .n_kv_heads = kv_heads, .head_dim = head_dim};
  host.seq_lens = lens.data();
  const Reference want = reference(q, k, v, dout, host);
  for (const char* choice : {"cudnn", "ours"}) {
    DYNAMIC_SECTION("MEGATRAIN_ATTENTION=" << choice) {
      setenv("MEGATRAIN_ATTENTION", choice, 1);
      auto be = mt::make_cuda_backend(mt::DType::bf16);
      const Reference got = through_backend(*be, q, k, v, dout, host, lens);
      check_close("backend attention out", got.out, want.out, tolerance<bf16>);
      check_close("backend attention lse", got.lse, want.lse, 1e-4);
      check_close("backend attention dq", got.dq, want.dq, tolerance<bf16>);
      check_close("backend attention dk", got.dk, want.dk, tolerance<bf16>);
      check_close("backend attention dv", got.dv, want.dv, tolerance<bf16>);
      unsetenv("MEGATRAIN_ATTENTION");
    }
  }
}

// MEGATRAIN_ATTENTION=auto through the CUDA backend, per direction against the plan's reserve: with none reserved
// (the deterministic backward does not fit) the forward is cuDNN's and the backward ours, bit for bit as the two run
// directly; with the backward's figure reserved both are cuDNN's; either way the results match the reference.
TEST_CASE("cuda backend attention: auto runs cuDNN's forward, and its backward only within the reserve",
          "[gpu][attention][cudnn][backend]") {
  MT_REQUIRE_GPU();
  const int64_t batch = 2, seq = 256, heads = 8, kv_heads = 2, head_dim = 128, T = batch * seq;  // 256: a bucket
  const int64_t q_size = T * heads * head_dim, kv_size = T * kv_heads * head_dim, lse_size = batch * heads * seq;
  const std::vector<int32_t> lens{256, 93};
  const auto [q, k, v, dout] = inputs(q_size, kv_size, 61);
  mt::AttnShape host{.batch = batch, .seq = seq, .n_heads = heads, .n_kv_heads = kv_heads, .head_dim = head_dim};
  host.seq_lens = lens.data();
  const Reference want = reference(q, k, v, dout, host);
  // The two implementations run directly: cuDNN's forward, then each backward from its out and lse.
  auto cudnn = make_cudnn();
  auto d_lens = upload_ints(lens);
  mt::AttnShape direct = host;
  direct.seq_lens = d_lens->get();
  auto d_q = upload<bf16>(q), d_k = upload<bf16>(k), d_v = upload<bf16>(v), d_dout = upload<bf16>(dout);
  DeviceBuffer<bf16> out(q_size), dq_ours(q_size), dk_ours(kv_size), dv_ours(kv_size), dq_cudnn(q_size),
      dk_cudnn(kv_size), dv_cudnn(kv_size);
  DeviceBuffer<float> lse(lse_size);
  REQUIRE(cudnn->forward(out.get(), lse.get(), d_q->get(), d_k->get(), d_v->get(), direct));
  cu::attention_backward<bf16>(dq_ours.get(), dk_ours.get(), dv_ours.get(), d_dout->get(), d_q->get(), d_k->get(),
                               d_v->get(), out.get(), lse.get(), direct, test_stream());
  REQUIRE(cudnn->backward(dq_cudnn.get(), dk_cudnn.get(), dv_cudnn.get(), d_dout->get(), d_q->get(), d_k->get(),
                          d_v->get(), out.get(), lse.get(), direct));
  const int64_t backward_need = cudnn->workspace_need(true, direct);
  REQUIRE(backward_need > 0);
  const int64_t forward_need = cudnn->workspace_need(false, direct);
  REQUIRE(forward_need <= mt::kCudnnGraphUnit);
  mt::test::sync();
  const auto want_out = download(out), want_lse = download(lse);
  for (const bool reserved : {false, true}) {
    DYNAMIC_SECTION("reserve " << (reserved ? "the deterministic backward's workspace" : "the forward's")) {
      unsetenv("MEGATRAIN_ATTENTION");
      auto be = mt::make_cuda_backend(mt::DType::bf16);
      be->set_attention_workspace(reserved ? backward_need : forward_need);
      const Reference got = through_backend(*be, q, k, v, dout, host, lens);
      CHECK(same_bits(got.out, want_out));  // cuDNN's forward either way
      CHECK(same_bits(got.lse, want_lse));
      CHECK(same_bits(got.dq, download(reserved ? dq_cudnn : dq_ours)));
      CHECK(same_bits(got.dk, download(reserved ? dk_cudnn : dk_ours)));
      CHECK(same_bits(got.dv, download(reserved ? dv_cudnn : dv_ours)));
      check_close("auto attention out", got.out, want.out, tolerance<bf16>);
      check_close("auto attention dq", got.dq, want.dq, tolerance<bf16>);
      check_close("auto attention dk", got.dk, want.dk, tolerance<bf16>);
      check_close("auto attention dv", got.dv, want.dv, tolerance<bf16>);
    }
  }
}

// A soft-capped layer (Gemma 2) through the CUDA backend under auto with the deterministic backward's workspace
// reserved: both directions are cuDNN's (bit for bit as CudnnAttention runs them directly), and match the reference.
TEST_CASE("cuda backend attention: auto runs cuDNN both ways for a soft-capped layer within the reserve",
          "[gpu][attention][cudnn][backend]") {
  MT_REQUIRE_GPU();
  const int64_t batch = 2, seq = 256, heads = 8, kv_heads = 4, head_dim = 256, T = batch * seq;
  const int64_t q_size = T * heads * head_dim, kv_size = T * kv_heads * head_dim, lse_size = batch * heads * seq;
  const std::vector<int32_t> lens{256, 131};
  const auto [q, k, v, dout] = inputs(q_size, kv_size, 71);
  mt::AttnShape host{.batch = batch,
                     .seq = seq,
                     .n_heads = heads,
                     .n_kv_heads = kv_heads,
                     .head_dim = head_dim,
                     .window = 100,
                     .softcap = 2.f};
  host.seq_lens = lens.data();
  const Reference want = reference(q, k, v, dout, host);
  auto cudnn = make_cudnn();
  auto d_lens = upload_ints(lens);
  mt::AttnShape direct = host;
  direct.seq_lens = d_lens->get();
  auto d_q = upload<bf16>(q), d_k = upload<bf16>(k), d_v = upload<bf16>(v), d_dout = upload<bf16>(dout);
  DeviceBuffer<bf16> out(q_size), dq(q_size), dk(kv_size), dv(kv_size);
  DeviceBuffer<float> lse(lse_size);
  const mt::cuda::CudnnPlanInfo fwd = cudnn->plan_info(false, direct), bwd = cudnn->plan_info(true, direct);
  INFO("forward plan: " << (fwd.ok ? "engine " + std::to_string(fwd.engine) : fwd.error));
  INFO("backward plan: " << (bwd.ok ? "engine " + std::to_string(bwd.engine) : bwd.error));
  REQUIRE(cudnn->forward(out.get(), lse.get(), d_q->get(), d_k->get(), d_v->get(), direct));
  REQUIRE(cudnn->backward(dq.get(), dk.get(), dv.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(), out.get(),
                          lse.get(), direct));
  const int64_t backward_need = cudnn->workspace_need(true, direct);
  REQUIRE(backward_need > 0);
  mt::test::sync();
  unsetenv("MEGATRAIN_ATTENTION");
  auto be = mt::make_cuda_backend(mt::DType::bf16);
  be->set_attention_workspace(backward_need);
  const Reference got = through_backend(*be, q, k, v, dout, host, lens);
  CHECK(same_bits(got.out, download(out)));
  CHECK(same_bits(got.lse, download(lse)));
  CHECK(same_bits(got.dq, download(dq)));
  CHECK(same_bits(got.dk, download(dk)));
  CHECK(same_bits(got.dv, download(dv)));
  check_close("soft-capped attention out", got.out, want.out, tolerance<bf16>);
  check_close("soft-capped attention lse", got.lse, want.lse, 1e-4);
  check_close("soft-capped attention dq", got.dq, want.dq, tolerance<bf16>);
  check_close("soft-capped attention dk", got.dk, want.dk, tolerance<bf16>);
  check_close("soft-capped attention dv", got.dv, want.dv, tolerance<bf16>);
}

// Packed segments and chunked attention's chunks on cuDNN, as their virtual batch (backend/segment_batch.h): the
// layout built on the host as the engine builds it, groups of several length classes (fillers, padding, windows,
// soft-cap, sinks, GQA), a segment past the backward's tile, and calls split by a workspace limit; forward and the
// deterministic backward against the CPU reference with its segments, bit for bit on a repeat and across call
// splits, the non-deterministic one within tolerance (its groups ragged, or gathered), padded rows 0, each
// implementation's forward paired with the other's backward, the workspace within the plan's figure; and through the
// CUDA backend under MEGATRAIN_ATTENTION=cudnn, bit for bit as CudnnAttention runs.
namespace {

struct SegmentCase {
  CudnnCase c;
  std::vector<std::vector<int32_t>> pieces;  // per sequence, its segments' lengths (their sum: the sequence's length)
  const char* tile = "8192";                 // MEGATRAIN_CUDNN_BACKWARD_TILE
};

// A case's ids (per sequence 0, 1, ..., -1 on padding) and its layout placed on the GPU.
struct SegmentShapes {
  std::vector<int32_t> ids;
  mt::SegmentBatchLayout layout;
  std::unique_ptr<DeviceBuffer<int32_t>> d_ids, d_starts, d_lens;
  mt::SegmentBatch batch;
};
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
  };
  return cases;
}

}  // namespace

TEST_CASE("cudnn attention: packed segments and chunks as a virtual batch match the reference",
          "[gpu][attention][cudnn][segments]") {
  MT_REQUIRE_GPU();
  auto cudnn = make_cudnn();
  REQUIRE(cudnn->version() > 0);
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
        int64_t planned = 0;
        for (const mt::SegmentGroup& g : seg->layout.groups) {
          const mt::AttnShape v = mt::cudnn_segment_group_shape(dev, g);
          planned = std::max(planned, mt::cudnn_segment_call_bytes(true, v, v.batch));
        }
        const int64_t need = cudnn->workspace_need(true, dev);
        INFO(mt::cudnn_backward_name() << " workspace: cuDNN " << need << " B, plan " << planned << " B");
        REQUIRE(need > 0);
        CHECK(need <= planned);
        check_against_reference(*cudnn, c, host, dev, 91);
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
  const mt::AttnShape v = mt::cudnn_segment_group_shape(dev, seg->layout.groups[0]);
  const int64_t T = len, q_size = T * 8 * 128, kv_size = T * 2 * 128, lse_size = 8 * T;
  const auto [q, k, vv, dout] = inputs(q_size, kv_size, 93);
  auto cudnn = make_cudnn();
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
    const int64_t limit = mt::cudnn_segment_call_bytes(true, v, per_call);
    REQUIRE(mt::cudnn_segment_call_batch(true, v, limit) == per_call);
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
  auto be = mt::make_cuda_backend(mt::DType::bf16);
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

namespace {

// Median of 5 timed runs on the tests' stream after 2 warm-ups, in TFLOP/s; -1 where the run was not possible.
// MEGATRAIN_PROBE_MAX_SEQ: the probes skip longer shapes (a shorter probe: one cuDNN build against another, say).
bool past_probe_limit(int64_t seq) {
  const char* longest = std::getenv("MEGATRAIN_PROBE_MAX_SEQ");
  return longest != nullptr && seq > std::atoll(longest);
}

template <typename Run>
double median_tflops(Run&& run, double flops) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < 2; ++i)
    if (!run()) return -1.0;
  std::vector<double> tf;
  for (int i = 0; i < 5; ++i) {
    cudaEventRecord(a, test_stream());
    run();
    cudaEventRecord(b, test_stream());
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    tf.push_back(flops / (ms * 1e-3) / 1e12);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(tf.begin(), tf.end());
  return tf[2];
}

// A probe's buffers: q, k, v (= k) and dout (= q) N(0,1) bf16 from seed (the NaN fill would poison the timing runs'
// softmax), the outputs and gradients; and our kernel's forward and backward TFLOP/s on them (median_tflops).
struct ProbeBuffers {
  DeviceBuffer<bf16> q, k, v, out, dout, dq, dk, dv;
  DeviceBuffer<float> lse;
  ProbeBuffers(int64_t q_size, int64_t kv_size, int64_t lse_size, uint32_t seed)
      : q(q_size), k(kv_size), v(kv_size), out(q_size), dout(q_size), dq(q_size), dk(kv_size), dv(kv_size),
        lse(lse_size) {
    const auto host = rounded<bf16>(random_floats(q_size, seed)), hostk = rounded<bf16>(random_floats(kv_size, seed + 1));
    auto d_q = upload<bf16>(host), d_k = upload<bf16>(hostk);
    MT_CUDA_OK(cudaMemcpyAsync(q.get(), d_q->get(), q_size * 2, cudaMemcpyDeviceToDevice, test_stream()));
    MT_CUDA_OK(cudaMemcpyAsync(dout.get(), d_q->get(), q_size * 2, cudaMemcpyDeviceToDevice, test_stream()));
    MT_CUDA_OK(cudaMemcpyAsync(k.get(), d_k->get(), kv_size * 2, cudaMemcpyDeviceToDevice, test_stream()));
    MT_CUDA_OK(cudaMemcpyAsync(v.get(), d_k->get(), kv_size * 2, cudaMemcpyDeviceToDevice, test_stream()));
    mt::test::sync();
  }
  std::pair<double, double> ours_tflops(const mt::AttnShape& s, double fwd_flops, double bwd_flops) {
    const double fwd = median_tflops(
        [&] {
          cu::attention_forward<bf16>(out.get(), lse.get(), q.get(), k.get(), v.get(), s, test_stream());
          return true;
        },
        fwd_flops);
    const double bwd = median_tflops(
        [&] {
          cu::attention_backward<bf16>(dq.get(), dk.get(), dv.get(), dout.get(), q.get(), k.get(), v.get(), out.get(),
                                       lse.get(), s, test_stream());
          return true;
        },
        bwd_flops);
    return {fwd, bwd};
  }
};

}  // namespace

// The probe: for causal bf16 head_dim 128 GQA 16:2 at the issue's shapes (about 32K tokens each) and Gemma-2-9B's
// soft-capped head_dim-256 layers (16:8, cap 50, scale 1/16; global and 4096-window sliding), whether each graph
// finalized, its engine and workspace, and ours-vs-cuDNN forward/backward TFLOP/s. FLOPs as
// tools/bench_torch_attention.py counts them: forward 4·b·h·d·(s²/2 causal, or the window's band of key-query
// pairs), backward 2.5 × forward.
TEST_CASE("attention probe: cuDNN plans and ours-vs-cuDNN TFLOP/s", "[.attention_bench]") {
  MT_REQUIRE_GPU();
  auto cudnn = make_cudnn();
  std::printf(
      "attention probe: cuDNN %lld (in training, auto runs the deterministic backward where the memory plan "
      "reserved its workspace: plan/cudnn_attention_plan.h)\n",
      static_cast<long long>(cudnn->version()));
  struct Shape {
    int64_t batch, seq, heads, kv_heads, head_dim, window = 0;
    float scale = 0.f, softcap = 0.f;
  };
  const float gemma_scale = 1.f / 16.f, gemma_cap = 50.f;
  for (const Shape sh : {Shape{8, 4096, 32, 4, 128},  // Qwen3-30B-A3B's micro-batch
                         Shape{4, 8192, 16, 2, 128}, Shape{1, 32768, 16, 2, 128}, Shape{1, 131072, 16, 2, 128},
                         Shape{1, 65536, 28, 4, 128},
                         Shape{32, 1024, 16, 8, 256, 0, gemma_scale, gemma_cap},
                         Shape{4, 8192, 16, 8, 256, 0, gemma_scale, gemma_cap},
                         Shape{4, 8192, 16, 8, 256, 4096, gemma_scale, gemma_cap}}) {
    if (past_probe_limit(sh.seq)) continue;
    const int64_t heads = sh.heads, kv_heads = sh.kv_heads, head_dim = sh.head_dim;
    const int64_t T = sh.batch * sh.seq, q_size = T * heads * head_dim, kv_size = T * kv_heads * head_dim;
    mt::AttnShape s{.batch = sh.batch,
                    .seq = sh.seq,
                    .n_heads = heads,
                    .n_kv_heads = kv_heads,
                    .head_dim = head_dim,
                    .window = sh.window,
                    .scale = sh.scale,
                    .softcap = sh.softcap};
    const double S = static_cast<double>(sh.seq), w = static_cast<double>(sh.window);
    const double pairs = sh.window > 0 && sh.window < sh.seq ? w * (w + 1) / 2 + (S - w) * w : S * S / 2;
    const double fwd_flops = 4.0 * sh.batch * heads * head_dim * pairs;
    const double bwd_flops = 2.5 * fwd_flops;
    ProbeBuffers buffers(q_size, kv_size, sh.batch * heads * sh.seq, 51);
    auto &q = buffers.q, &k = buffers.k, &v = buffers.v, &out = buffers.out, &dout = buffers.dout;
    auto &dq = buffers.dq, &dk = buffers.dk, &dv = buffers.dv;
    auto& lse = buffers.lse;
    std::printf("shape batch %lld seq %lld heads %lld/%lld head_dim %lld window %lld soft-cap %g causal bf16\n",
                static_cast<long long>(sh.batch), static_cast<long long>(sh.seq), static_cast<long long>(heads),
                static_cast<long long>(kv_heads), static_cast<long long>(head_dim), static_cast<long long>(sh.window),
                static_cast<double>(sh.softcap));
    for (const auto& [label, backward, deterministic] :
         {std::tuple{"forward", false, true},
          {"backward deterministic", true, true},
          {"backward non-deterministic (for comparison only)", true, false}}) {
      const mt::cuda::CudnnPlanInfo info = cudnn->plan_info(backward, s, deterministic);
      const std::string text =
          info.ok
              ? "finalized, engine " + std::to_string(info.engine) + ", workspace " +
                    std::to_string(info.workspace_bytes >> 20) + " MiB, " + std::to_string(info.candidates) +
                    " configs offered (engines " + info.offered + "), built in " +
                    std::to_string(static_cast<int64_t>(info.build_ms)) + " ms" +
                    (info.notes.empty() ? "" : ", notes " + info.notes) +
                    (backward && deterministic
                         ? ", plan formula " +
                               std::to_string(mt::cudnn_backward_graph_bytes(sh.batch, sh.seq, heads, head_dim) >> 20) +
                               " MiB"
                         : "")
              : "FAILED: " + info.error;
      std::printf("  cuDNN %s: %s\n", label, text.c_str());
    }
    const auto [ours_fwd, ours_bwd] = buffers.ours_tflops(s, fwd_flops, bwd_flops);
    const double cudnn_fwd =
        median_tflops([&] { return cudnn->forward(out.get(), lse.get(), q.get(), k.get(), v.get(), s); }, fwd_flops);
    // The deterministic backward as one graph (MEGATRAIN_CUDNN_BACKWARD_TILE=0), then in tiles of each length below
    // the sequence's (the default tile first).
    auto deterministic_at = [&](const char* tile) {
      setenv("MEGATRAIN_CUDNN_BACKWARD_TILE", tile, 1);
      const double tf = median_tflops(
          [&] {
            return cudnn->backward(dq.get(), dk.get(), dv.get(), dout.get(), q.get(), k.get(), v.get(), out.get(),
                                   lse.get(), s);
          },
          bwd_flops);
      unsetenv("MEGATRAIN_CUDNN_BACKWARD_TILE");
      return tf;
    };
    const double cudnn_bwd = sh.seq <= 32768 ? deterministic_at("0") : -1.0;  // one graph: quadratic workspace
    for (const char* tile : {"8192", "4096", "16384"}) {
      if (std::atoll(tile) >= sh.seq || sh.window > 0) continue;
      setenv("MEGATRAIN_CUDNN_BACKWARD_TILE", tile, 1);
      const int64_t need = cudnn->workspace_need(true, s);
      unsetenv("MEGATRAIN_CUDNN_BACKWARD_TILE");
      std::printf("  cuDNN backward deterministic in tiles of %s: %.1f TFLOP/s, workspace %lld MiB\n", tile,
                  deterministic_at(tile), static_cast<long long>(need >> 20));
    }
    if (sh.batch > 1 && sh.seq <= 32768) {  // calls of a few sequences (workspace limits that hold them) against one
      std::printf("  cuDNN backward deterministic in calls of:");
      for (const int64_t per_call : {int64_t{1}, int64_t{2}, int64_t{4}}) {
        if (per_call >= sh.batch) continue;
        setenv("MEGATRAIN_CUDNN_BACKWARD_TILE", "0", 1);
        const int64_t limit = mt::cudnn_backward_call_bytes(s, per_call);
        const double tf = median_tflops(
            [&] {
              return cudnn->backward(dq.get(), dk.get(), dv.get(), dout.get(), q.get(), k.get(), v.get(), out.get(),
                                     lse.get(), s, limit);
            },
            bwd_flops);
        unsetenv("MEGATRAIN_CUDNN_BACKWARD_TILE");
        std::printf(" %lld %.1f TFLOP/s;", static_cast<long long>(per_call), tf);
      }
      std::printf(" %lld (one call) %.1f\n", static_cast<long long>(sh.batch), cudnn_bwd);
    }
    const Env non_deterministic("MEGATRAIN_ATTENTION_DETERMINISTIC", "0");
    const double cudnn_bwd_nd = median_tflops(
        [&] {
          return cudnn->backward(dq.get(), dk.get(), dv.get(), dout.get(), q.get(), k.get(), v.get(), out.get(),
                                 lse.get(), s);
        },
        bwd_flops);
    std::printf(
        "  TFLOP/s  ours: forward %.1f backward %.1f | cuDNN: forward %.1f backward %.1f (deterministic), "
        "%.1f (non-deterministic)\n",
        ours_fwd, ours_bwd, cudnn_fwd, cudnn_bwd, cudnn_bwd_nd);
    // cuDNN against our kernel at this length (both bf16; ‖cuDNN − ours‖/‖ours‖), and the deterministic backward twice.
    if (cudnn_fwd > 0 && cudnn_bwd > 0) {
      DeviceBuffer<bf16> out2(q_size), dq2(q_size), dk2(kv_size), dv2(kv_size), dq3(q_size);
      DeviceBuffer<float> lse2(sh.batch * heads * sh.seq);
      cu::attention_forward<bf16>(out.get(), lse.get(), q.get(), k.get(), v.get(), s, test_stream());
      cu::attention_backward<bf16>(dq.get(), dk.get(), dv.get(), dout.get(), q.get(), k.get(), v.get(), out.get(),
                                   lse.get(), s, test_stream());
      REQUIRE(cudnn->forward(out2.get(), lse2.get(), q.get(), k.get(), v.get(), s));
      setenv("MEGATRAIN_CUDNN_BACKWARD_TILE", "0", 1);
      REQUIRE(cudnn->backward(dq2.get(), dk2.get(), dv2.get(), dout.get(), q.get(), k.get(), v.get(), out2.get(),
                              lse2.get(), s));
      REQUIRE(cudnn->backward(dq3.get(), dk2.get(), dv2.get(), dout.get(), q.get(), k.get(), v.get(), out2.get(),
                              lse2.get(), s));
      unsetenv("MEGATRAIN_CUDNN_BACKWARD_TILE");
      const auto got_dq = download(dq2);
      std::printf("  cuDNN vs ours: out %.2e lse %.2e dq %.2e dk %.2e dv %.2e; deterministic dq bit for bit: %s\n",
                  rel_err(download(out2), download(out)), rel_err(download(lse2), download(lse)),
                  rel_err(got_dq, download(dq)), rel_err(download(dk2), download(dk)),
                  rel_err(download(dv2), download(dv)), same_bits(got_dq, download(dq3)) ? "yes" : "NO");
    }
    // The default tiles against our kernel (where the sequence tiles), and twice: bit for bit.
    if (mt::cudnn_backward_tile(s) > 0 && sh.window == 0) {
      DeviceBuffer<bf16> dq2(q_size), dk2(kv_size), dv2(kv_size), dq3(q_size);
      cu::attention_forward<bf16>(out.get(), lse.get(), q.get(), k.get(), v.get(), s, test_stream());
      cu::attention_backward<bf16>(dq.get(), dk.get(), dv.get(), dout.get(), q.get(), k.get(), v.get(), out.get(),
                                   lse.get(), s, test_stream());
      REQUIRE(cudnn->backward(dq2.get(), dk2.get(), dv2.get(), dout.get(), q.get(), k.get(), v.get(), out.get(),
                              lse.get(), s));
      REQUIRE(cudnn->backward(dq3.get(), dk2.get(), dv2.get(), dout.get(), q.get(), k.get(), v.get(), out.get(),
                              lse.get(), s));
      const auto got_dq = download(dq2);
      std::printf("  cuDNN tiles (%lld) vs ours: dq %.2e dk %.2e dv %.2e; dq bit for bit: %s\n",
                  static_cast<long long>(mt::cudnn_backward_tile(s)), rel_err(got_dq, download(dq)),
                  rel_err(download(dk2), download(dk)), rel_err(download(dv2), download(dv)),
                  same_bits(got_dq, download(dq3)) ? "yes" : "NO");
    }
    std::fflush(stdout);
    MT_CUDA_OK(cudaGetLastError());
  }
}

// The issue's attention shapes within the probes' limit (causal bf16, GQA 16:2 heads of 128, 4 × 8192 and 1 × 32768)
// and their backward's FLOPs (2.5 × the causal forward's 4·b·h·d·s²/2), for probes of the backward as one graph.
struct IssueShape {
  mt::AttnShape s;
  double bwd_flops;
};
std::vector<IssueShape> issue_shapes() {
  std::vector<IssueShape> shapes;
  for (const auto& [batch, seq] : {std::pair<int64_t, int64_t>{4, 8192}, {1, 32768}}) {
    if (past_probe_limit(seq)) continue;
    const mt::AttnShape s{.batch = batch, .seq = seq, .n_heads = 16, .n_kv_heads = 2, .head_dim = 128};
    shapes.push_back({s, 2.5 * 4.0 * batch * 16 * 128 * (static_cast<double>(seq) * seq / 2)});
  }
  return shapes;
}

// The engine survey: for the issue's causal bf16 head_dim-128 GQA 16:2 shapes, every engine config cuDNN's
// heuristics offer the deterministic backward graph (dQ straight from dS, one graph, untiled) and the
// non-deterministic one (dQ through an fp32 accumulator), and the one-knob variations of each graph's first, each
// timed as the probe times the backward (median of 5 after 2 warm-ups), with its workspace, and whether three more
// runs of it give the same dq bits: a knob may select a deterministic schedule of the accumulator graph (cuDNN's
// ordered dQ) that its engine's notes do not tell apart.
TEST_CASE("attention probe: cuDNN engine configs of the backward", "[.attention_survey]") {
  MT_REQUIRE_GPU();
  const Env whole("MEGATRAIN_CUDNN_BACKWARD_TILE", "0");
  for (const auto& [s, bwd_flops] : issue_shapes()) {
    const int64_t T = s.batch * s.seq, q_size = T * s.n_heads * s.head_dim;
    ProbeBuffers buffers(q_size, T * s.n_kv_heads * s.head_dim, s.batch * s.n_heads * s.seq, 51);
    DeviceBuffer<bf16> dq2(q_size);
    auto cudnn = make_cudnn();
    std::printf("survey: cuDNN %lld, batch %lld seq %lld heads 16/2 head_dim 128 causal bf16\n",
                static_cast<long long>(cudnn->version()), static_cast<long long>(s.batch),
                static_cast<long long>(s.seq));
    REQUIRE(cudnn->forward(buffers.out.get(), buffers.lse.get(), buffers.q.get(), buffers.k.get(), buffers.v.get(), s));
    auto run = [&](bf16* dq) {
      return cudnn->backward(dq, buffers.dk.get(), buffers.dv.get(), buffers.dout.get(), buffers.q.get(),
                             buffers.k.get(), buffers.v.get(), buffers.out.get(), buffers.lse.get(), s);
    };
    for (const bool deterministic : {true, false}) {
      const Env kind("MEGATRAIN_ATTENTION_DETERMINISTIC", deterministic ? "1" : "0");
      const char* graph = deterministic ? "deterministic graph" : "accumulator graph";
      const std::vector<mt::cuda::CudnnEngineConfig> configs = cudnn->engine_configs(true, s, deterministic);
      std::string refused;
      for (size_t i = 0; i < configs.size(); ++i) {
        const mt::cuda::CudnnEngineConfig& c = configs[i];
        if (!cudnn->use_engine_config(true, s, deterministic, c)) {
          refused += " " + std::to_string(c.engine) + " " + c.describe() + ";";
          continue;
        }
        std::printf("  %s, config %zu: engine %lld%s %s: ", graph, i, static_cast<long long>(c.engine),
                    c.nondeterministic ? " (non-deterministic)" : "", c.describe().c_str());
        const double tf = median_tflops([&] { return run(buffers.dq.get()); }, bwd_flops);
        const auto first = download(buffers.dq);
        bool same = true;
        for (int repeat = 0; repeat < 3; ++repeat) same = same && run(dq2.get()) && same_bits(first, download(dq2));
        std::printf("%.1f TFLOP/s, workspace %lld MiB, dq bit for bit on three repeats: %s\n", tf,
                    static_cast<long long>(cudnn->plan_info(true, s, deterministic).workspace_bytes >> 20),
                    same ? "yes" : "NO");
        std::fflush(stdout);
      }
      std::printf("  %s, configs that do not finalize:%s\n", graph, refused.empty() ? " none" : refused.c_str());
    }
  }
}

// Whether GQA costs cuDNN's deterministic backward: at the issue's shapes (causal bf16, 16/2 heads of 128; one graph,
// untiled), the backward of the GQA call against the same call with k and v repeated to every query head (MHA 16/16,
// as a backward that expanded the group and summed dK, dV over it would run), each direction-deterministic and not,
// TFLOP/s counting the same FLOPs, median of 5 after 2 warm-ups.
TEST_CASE("attention probe: cuDNN's backward on GQA and on its heads repeated", "[.attention_gqa]") {
  MT_REQUIRE_GPU();
  const Env whole("MEGATRAIN_CUDNN_BACKWARD_TILE", "0");
  for (const auto& [gqa_shape, bwd_flops] : issue_shapes()) {
    const int64_t heads = gqa_shape.n_heads, kv_heads = gqa_shape.n_kv_heads, head_dim = gqa_shape.head_dim;
    const int64_t T = gqa_shape.batch * gqa_shape.seq, q_size = T * heads * head_dim;
    mt::AttnShape mha_shape = gqa_shape;
    mha_shape.n_kv_heads = heads;
    ProbeBuffers gqa(q_size, T * kv_heads * head_dim, gqa_shape.batch * heads * gqa_shape.seq, 51);
    ProbeBuffers mha(q_size, q_size, gqa_shape.batch * heads * gqa_shape.seq, 52);
    const int64_t row = head_dim * 2;  // k and v repeated: query head j reads kv head j / (heads / kv_heads)
    for (int64_t j = 0; j < heads; ++j) {
      const int64_t g = j / (heads / kv_heads);
      for (auto [dst, src] : {std::pair{mha.k.get(), gqa.k.get()}, std::pair{mha.v.get(), gqa.v.get()}})
        MT_CUDA_OK(cudaMemcpy2DAsync(dst + j * head_dim, heads * row, src + g * head_dim, kv_heads * row, row, T,
                                     cudaMemcpyDeviceToDevice, test_stream()));
    }
    MT_CUDA_OK(cudaMemcpyAsync(mha.q.get(), gqa.q.get(), q_size * 2, cudaMemcpyDeviceToDevice, test_stream()));
    MT_CUDA_OK(cudaMemcpyAsync(mha.dout.get(), gqa.dout.get(), q_size * 2, cudaMemcpyDeviceToDevice, test_stream()));
    auto cudnn = make_cudnn();
    auto backward = [&](ProbeBuffers& b, const mt::AttnShape& s, bool deterministic) {
      const Env kind("MEGATRAIN_ATTENTION_DETERMINISTIC", deterministic ? "1" : "0");
      return cudnn->backward(b.dq.get(), b.dk.get(), b.dv.get(), b.dout.get(), b.q.get(), b.k.get(), b.v.get(),
                             b.out.get(), b.lse.get(), s);
    };
    for (auto [label, b, s] : {std::tuple{"GQA 16/2", &gqa, gqa_shape}, {"repeated to 16/16", &mha, mha_shape}}) {
      REQUIRE(cudnn->forward(b->out.get(), b->lse.get(), b->q.get(), b->k.get(), b->v.get(), s));
      const double det = median_tflops([&] { return backward(*b, s, true); }, bwd_flops);
      const double non_det = median_tflops([&] { return backward(*b, s, false); }, bwd_flops);
      const mt::cuda::CudnnPlanInfo info = cudnn->plan_info(true, s, true);
      std::printf(
          "gqa: %lld x %lld, %s: backward deterministic %.1f TFLOP/s (workspace %lld MiB, engine %lld), "
          "non-deterministic %.1f\n",
          static_cast<long long>(s.batch), static_cast<long long>(s.seq), label, det,
          static_cast<long long>(info.workspace_bytes >> 20), static_cast<long long>(info.engine), non_det);
    }
    // The repeated call's dq against the GQA call's (both deterministic: the same sums but for the group's order)
    REQUIRE(backward(gqa, gqa_shape, true));
    REQUIRE(backward(mha, mha_shape, true));
    std::printf("gqa: %lld x %lld: dq of the repeated call against the GQA call's: %.2e relative\n",
                static_cast<long long>(gqa_shape.batch), static_cast<long long>(gqa_shape.seq),
                rel_err(download(mha.dq), download(gqa.dq)));
    std::fflush(stdout);
  }
}

// Whether cuDNN's padded calls cost their valid tokens or their whole length: the forward (ragged, and the padded
// graph: MEGATRAIN_CUDNN_RAGGED=0) and the deterministic backward (one graph) of 2 sequences of 16384 rows, all
// valid, 8192 and 9000 of them valid, against 2 × 8192 unpadded; then the deterministic backward in tiles (the
// default, or MEGATRAIN_CUDNN_BACKWARD_TILE's) of 2 sequences of 32768 rows, unpadded, padded with all rows valid (as
// training passes a batch), and 20000 and 9000 valid (causal bf16, 16/2 heads of 128; milliseconds, median of 5 after 2
// warm-ups).
TEST_CASE("attention probe: what padded rows cost cuDNN", "[.attention_padding]") {
  MT_REQUIRE_GPU();
  struct Rows {
    int64_t seq, valid;  // valid == seq: unpadded (no seq_lens)
  };
  const int64_t heads = 16, kv_heads = 2, head_dim = 128, batch = 2, longest = 16384;
  {  // one graph
    const Env whole("MEGATRAIN_CUDNN_BACKWARD_TILE", "0");
    for (const char* ragged : {"1", "0"}) {
      const Env forward_kind("MEGATRAIN_CUDNN_RAGGED", ragged);
      auto cudnn = make_cudnn();
      ProbeBuffers buffers(batch * longest * heads * head_dim, batch * longest * kv_heads * head_dim,
                           batch * heads * longest, 51);
      for (const Rows r : {Rows{longest, longest}, Rows{longest, 8192}, Rows{longest, 9000}, Rows{8192, 8192}}) {
        auto lens = upload_ints(std::vector<int32_t>(static_cast<size_t>(batch), static_cast<int32_t>(r.valid)));
        const mt::AttnShape s{.batch = batch,
                              .seq = r.seq,
                              .n_heads = heads,
                              .n_kv_heads = kv_heads,
                              .head_dim = head_dim,
                              .seq_lens = r.valid < r.seq ? lens->get() : nullptr};
        const double fwd_ms = 1e3 / median_tflops(
                                        [&] {
                                          return cudnn->forward(buffers.out.get(), buffers.lse.get(), buffers.q.get(),
                                                                buffers.k.get(), buffers.v.get(), s);
                                        },
                                        1e12);
        const double bwd_ms =
            1e3 / median_tflops(
                      [&] {
                        return cudnn->backward(buffers.dq.get(), buffers.dk.get(), buffers.dv.get(), buffers.dout.get(),
                                               buffers.q.get(), buffers.k.get(), buffers.v.get(), buffers.out.get(),
                                               buffers.lse.get(), s);
                      },
                      1e12);
        std::printf("padding: %lld x %lld rows, %lld valid: forward (%s) %.3f ms, deterministic backward %.3f ms\n",
                    static_cast<long long>(batch), static_cast<long long>(r.seq), static_cast<long long>(r.valid),
                    *ragged == '1' ? "ragged" : "padded graph", fwd_ms, bwd_ms);
      }
    }
  }
  const int64_t tiled = 32768;
  auto cudnn = make_cudnn();
  ProbeBuffers buffers(batch * tiled * heads * head_dim, batch * tiled * kv_heads * head_dim, batch * heads * tiled,
                       51);
  for (const int64_t valid : {int64_t{0}, tiled, int64_t{20000}, int64_t{9000}}) {  // 0: unpadded
    auto lens = upload_ints(std::vector<int32_t>(static_cast<size_t>(batch), static_cast<int32_t>(valid)));
    const mt::AttnShape s{.batch = batch,
                          .seq = tiled,
                          .n_heads = heads,
                          .n_kv_heads = kv_heads,
                          .head_dim = head_dim,
                          .seq_lens = valid > 0 ? lens->get() : nullptr};
    REQUIRE(cudnn->forward(buffers.out.get(), buffers.lse.get(), buffers.q.get(), buffers.k.get(), buffers.v.get(), s));
    const double bwd_ms = 1e3 / median_tflops(
                                    [&] {
                                      return cudnn->backward(buffers.dq.get(), buffers.dk.get(), buffers.dv.get(),
                                                             buffers.dout.get(), buffers.q.get(), buffers.k.get(),
                                                             buffers.v.get(), buffers.out.get(), buffers.lse.get(), s);
                                    },
                                    1e12);
    std::printf("padding: %lld x %lld rows, %s: deterministic backward in tiles of %lld %.3f ms\n",
                static_cast<long long>(batch), static_cast<long long>(tiled),
                valid == 0 ? "unpadded" : (std::to_string(valid) + " valid").c_str(),
                static_cast<long long>(mt::cudnn_backward_tile(s)), bwd_ms);
  }
}

// The packed-segments probe: ours against cuDNN's virtual batch at packed shapes a fine-tuning run makes (segments of
// SFT-like lengths in 8 × 4096 and 4 × 8192, long documents in 1 × 32768, Llama 4's 8192-token chunks of a 32768
// sequence), forward and deterministic backward TFLOP/s, FLOPs counting each segment's causal pairs (len² / 2), the
// virtual batch's groups, and how far cuDNN's results are from ours.
TEST_CASE("attention probe: packed segments on our kernel and on cuDNN's virtual batch", "[.attention_bench]") {
  MT_REQUIRE_GPU();
  auto cudnn = make_cudnn();
  struct Packed {
    const char* name;
    int64_t batch, seq, heads, kv_heads, lo, hi;  // segment lengths uniform in [lo, hi]; lo == hi: fixed chunks
  };
  for (const Packed p : {Packed{"SFT-like segments 64-2048 in 8 x 4096", 8, 4096, 16, 2, 64, 2048},
                         Packed{"SFT-like segments 256-4096 in 4 x 8192", 4, 8192, 16, 2, 256, 4096},
                         Packed{"documents 2048-16384 in 1 x 32768", 1, 32768, 16, 2, 2048, 16384},
                         Packed{"Llama 4 chunks of 8192 in 1 x 32768 (40/8 heads)", 1, 32768, 40, 8, 8192, 8192}}) {
    const int64_t d = 128, T = p.batch * p.seq, q_size = T * p.heads * d, kv_size = T * p.kv_heads * d;
    std::mt19937 rng(17);
    std::vector<std::vector<int32_t>> pieces(static_cast<size_t>(p.batch));
    double pairs = 0;
    for (auto& row : pieces) {
      int64_t left = p.seq;
      while (left > 0) {
        const int64_t len = std::min<int64_t>(left, p.lo + static_cast<int64_t>(rng() % (p.hi - p.lo + 1)));
        row.push_back(static_cast<int32_t>(len));
        pairs += static_cast<double>(len) * (len + 1) / 2;
        left -= len;
      }
    }
    const SegmentCase sc{{p.name, p.batch, p.seq, p.heads, p.kv_heads, d, p.lo == p.hi ? p.lo : 0, {}}, pieces};
    CaseShapes shapes = case_shapes(sc.c);
    const auto seg = segment_shapes(sc, shapes);
    const mt::AttnShape& s = shapes.dev;
    const double fwd_flops = 4.0 * p.heads * d * pairs, bwd_flops = 2.5 * fwd_flops;
    ProbeBuffers buffers(q_size, kv_size, p.batch * p.heads * p.seq, 53);
    auto &q = buffers.q, &k = buffers.k, &v = buffers.v, &out = buffers.out, &dout = buffers.dout;
    auto &dq = buffers.dq, &dk = buffers.dk, &dv = buffers.dv;
    auto& lse = buffers.lse;
    DeviceBuffer<bf16> out2(q_size), dq2(q_size), dk2(kv_size), dv2(kv_size);
    DeviceBuffer<float> lse2(p.batch * p.heads * p.seq);
    std::string groups;
    for (const mt::SegmentGroup& g : seg->layout.groups)
      groups += " " + std::to_string(g.segments) + "/" + std::to_string(g.sequences) + "x" +
                std::to_string(mt::cudnn_segment_group_shape(s, g).seq);
    std::printf("packed: %s, %zu segments, heads %lld/%lld head_dim 128; groups (segments/sequences x length):%s; "
                "backward workspace %lld MiB\n",
                p.name, seg->layout.starts.size(), static_cast<long long>(p.heads),
                static_cast<long long>(p.kv_heads), groups.c_str(),
                static_cast<long long>(cudnn->workspace_need(true, s) >> 20));
    const auto [ours_fwd, ours_bwd] = buffers.ours_tflops(s, fwd_flops, bwd_flops);
    const double cudnn_fwd =
        median_tflops([&] { return cudnn->forward(out2.get(), lse2.get(), q.get(), k.get(), v.get(), s); }, fwd_flops);
    const double cudnn_bwd = median_tflops(
        [&] {
          return cudnn->backward(dq2.get(), dk2.get(), dv2.get(), dout.get(), q.get(), k.get(), v.get(), out.get(),
                                 lse.get(), s);
        },
        bwd_flops);
    std::printf("  forward: ours %.1f, cuDNN %.1f TFLOP/s; backward: ours %.1f, cuDNN %.1f TFLOP/s (%s)\n", ours_fwd,
                cudnn_fwd, ours_bwd, cudnn_bwd, mt::cudnn_backward_name());
    std::printf("  cuDNN vs ours: out %.2e lse %.2e dq %.2e dk %.2e dv %.2e\n", rel_err(download(out2), download(out)),
                rel_err(download(lse2), download(lse)), rel_err(download(dq2), download(dq)),
                rel_err(download(dk2), download(dk)), rel_err(download(dv2), download(dv)));
    std::fflush(stdout);
    MT_CUDA_OK(cudaGetLastError());
  }
}

#endif  // MEGATRAIN_HAVE_CUDNN
