// cuDNN's fused attention (kernels/attention/cudnn_attention.h) against the CPU reference: a table of rows (lengths
// odd and even, GQA ratios, padding, windows, scale, soft-cap, GPT-OSS's sinks, ALiBi, head_dim 64/128/256;
// cudnn_attention_cases.h), bf16 inputs rounded first and compared with the fp32 reference of the rounded inputs,
// forward and the deterministic backward (run twice: bit for bit; with sinks, d_sinks from cuDNN's out and lse as
// well) and the non-deterministic one (MEGATRAIN_ATTENTION_DETERMINISTIC=0: within tolerance and its workspace
// formula, ragged and padded), padded rows exactly 0, each implementation's forward paired with the other's backward
// (the lse convention is shared), the plan's workspace formula never below cuDNN's; where cudnn-frontend refuses the
// backward's graph (cudnn_frontend_gap: cuDNN 9.15 and older) our kernel's backward in its place. The tiled backward,
// the backend's dispatch, packed segments and the probes have files of their own (test_cuda_cudnn_*.cpp).
#ifdef MEGATRAIN_HAVE_CUDNN
#include <string>

#include "kernels/attention/cudnn_attention.h"
#include "gpu/cudnn_attention_cases.h"
#include "gpu/gpu_test_util.h"
#include "plan/cudnn_attention_plan.h"

namespace {
using namespace mt::test;
}  // namespace

TEST_CASE("cudnn attention forward and backward (deterministic or not) match the reference",
          "[gpu][attention][cudnn]") {
  MT_REQUIRE_GPU();
  CudnnPerSwitches cudnns;
  mt::cuda::CudnnAttention* const cudnn = &cudnns.current();
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
      // The backward's padded graph at the bucket, except where cudnn-frontend refuses it (cuDNN 9.15 and older:
      // soft-capped and ALiBi buckets off a multiple of 128), which then runs our kernel unless the call is ragged.
      const std::string refusal = backward_refusal(*cudnn, dev);
      REQUIRE(bwd.ok == refusal.empty());
      if (!bwd.ok) CHECK(bwd.error == refusal);
      // The memory plan's figure (plan/cudnn_attention_plan.h) never under-counts what this cuDNN asks for.
      const int64_t bucket = cudnn->plan().seq_bucket(c.seq);
      const int64_t planned = cudnn->plan().backward_graph_bytes(c.batch, bucket, c.heads, c.head_dim);
      INFO("backward workspace: cuDNN " << bwd.workspace_bytes << " B, plan " << planned << " B");
      CHECK(fwd.workspace_bytes <= mt::kCudnnGraphUnit);
      CHECK(bwd.workspace_bytes <= planned);
      // A staged batch's ragged backward holds less than its staging (the default); the padded graph holds both.
      const int64_t need = cudnn->workspace_need(true, dev);
      if (bwd.ok) CHECK(need > 0);
      if (need >= 0) CHECK(need <= planned + cudnn->plan().staging_bytes(true, dev));

      // The non-deterministic backward (MEGATRAIN_ATTENTION_DETERMINISTIC=0): within the plan's formula for it and
      // the reference's tolerance. Where its graph does not finalize, training runs our backward.
      const auto non_deterministic_rows = [&] {
        const Env non_deterministic("MEGATRAIN_ATTENTION_DETERMINISTIC", "0");
        mt::cuda::CudnnAttention* const nd_cudnn = &cudnns.current();  // this scope's switches
        const mt::cuda::CudnnPlanInfo nd = nd_cudnn->plan_info(true, dev, false);
        const int64_t planned_nd = nd_cudnn->plan().backward_graph_bytes(c.batch, bucket, c.heads, c.head_dim);
        const int64_t staging = nd_cudnn->plan().staging_bytes(true, dev), need = nd_cudnn->workspace_need(true, dev);
        INFO("non-deterministic backward workspace: cuDNN " << nd.workspace_bytes << " B, plan " << planned_nd
                                                            << " B, held " << need << " B");
        if (!nd.ok && nd.error != refusal) {
          WARN("cuDNN's non-deterministic backward does not finalize (" << c.name << "): " << nd.error);
          return;
        }
        if (nd.ok) {
          CHECK(nd.workspace_bytes <= planned_nd);
          CHECK(need > 0);
        }
        if (nd_cudnn->plan().ragged())
          CHECK(need <= planned_nd + staging);  // a staged batch's ragged call holds its graph and the lse
        else
          CHECK(need == (nd.ok ? nd.workspace_bytes + staging : -1));
        check_against_reference(*nd_cudnn, c, host, dev, 31);
      };

      check_against_reference(*cudnn, c, host, dev, 31);  // the ragged forward (and a staged batch's backward)
      non_deterministic_rows();
      const Env padded_graph("MEGATRAIN_CUDNN_RAGGED", "0");
      mt::cuda::CudnnAttention* const padded = &cudnns.current();
      CHECK(padded->workspace_need(true, dev) ==
            (bwd.ok ? bwd.workspace_bytes + padded->plan().staging_bytes(true, dev) : -1));  // refused: our kernel
      check_against_reference(*padded, c, host, dev, 31);
      non_deterministic_rows();
    }
  }
}
#endif  // MEGATRAIN_HAVE_CUDNN
