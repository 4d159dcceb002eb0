// The CUDA backend's attention dispatch (MEGATRAIN_ATTENTION): cuDNN and our kernel both against the CPU reference,
// and auto per direction against the reserved workspace (a soft-capped layer too).
#ifdef MEGATRAIN_HAVE_CUDNN
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/runtime/cuda_backend.h"
#include "gpu/cudnn_attention_cases.h"
#include "gpu/gpu_test_util.h"
#include "kernels/ops/kernels.h"
#include "plan/cudnn_attention_plan.h"

namespace {
using namespace mt::test;
namespace cu = mt::cuda;
}  // namespace

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
      auto be = mt::make_cuda_backend(mt::DType::bf16, 0, mt::environment_switches());
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
      auto be = mt::make_cuda_backend(mt::DType::bf16, 0, mt::environment_switches());
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
  auto be = mt::make_cuda_backend(mt::DType::bf16, 0, mt::environment_switches());
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
#endif  // MEGATRAIN_HAVE_CUDNN
