// cuDNN's fused flash attention (the runtime fusion engine's SDPA patterns) through the backend graph API, for
// the AttnShape cases it covers: bf16, causal, GQA/MQA, sliding window, right padding (per-sequence lengths),
// any scale, head_dim a multiple of 8 up to 256. Soft-cap, ALiBi and packed segments stay on kernels/attention.cu.
// Invariants: q/k/v/out and their gradients are read and written in place as token-major rows (BSHD strides);
// lse is ours ([batch, n_heads, seq], natural log of the final logits, 0 on padded rows), which is cuDNN's softmax
// stats, so a forward of one implementation pairs with a backward of the other; padded rows of every output are 0;
// the backward graph is the deterministic one (no fp32 dQ accumulation by atomics). One graph and plan per shape,
// built on first use and kept; the workspace grows through the backend's allocator and never shrinks, so a step
// at a shape seen before allocates nothing. A plan whose workspace exceeds MEGATRAIN_CUDNN_WORKSPACE_MIB (default
// 1024; the memory plan does not count it) is refused, so that shape runs our kernel.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.h"

namespace mt::cuda {

// MEGATRAIN_ATTENTION: ours (kernels/attention.cu always), cudnn (cuDNN wherever it covers the case and a plan
// finalizes), auto (the default: cuDNN where covered, from the H200 measurements in docs/PERFORMANCE.md).
enum class AttentionChoice { ours, cudnn, automatic };
AttentionChoice attention_choice_from_env();
const char* attention_choice_name(AttentionChoice c);
void log_attention_choice(AttentionChoice c);  // one info line: what the choice runs

// Why cuDNN does not cover a shape (empty when it does, before any plan is built): the features of AttnShape that
// only our kernel has, bf16 only, head_dim.
std::string cudnn_attention_gap(const AttnShape& s, DType dtype);

// What building one graph gave: whether it finalized, the engine, its workspace, or the first failing call.
struct CudnnPlanInfo {
  bool ok = false;
  int64_t engine = -1;          // CUDNN_ATTR_ENGINE_GLOBAL_INDEX of the chosen engine config
  int64_t workspace_bytes = 0;  // the plan's workspace plus our fp32 side tensors (softmax sum, dQ accumulator)
  int64_t candidates = 0;       // engine configs the heuristics offered
  std::string notes;            // the engine's numerical/behaviour notes
  std::string error;            // when !ok: "<descriptor> <attribute>: <cuDNN status> (<cuDNN's last message>)"
};

class CudnnAttention {
 public:
  using Alloc = std::function<void*(int64_t bytes)>;
  using Free = std::function<void(void*)>;
  CudnnAttention(cudaStream_t stream, Alloc alloc, Free release);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // cudnnGetVersion() of the loaded library, or 0 where cudnnCreate failed (then every plan fails with why).
  int64_t version();

  // Run when the plan for the shape finalizes (else return false, having run nothing). Pointers as in
  // Backend::attention_forward / attention_backward; the shape's device pointers (seq_lens) are read on the GPU.
  bool forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
               const AttnShape& s);
  bool backward(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv, const __nv_bfloat16* dout,
                const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, const __nv_bfloat16* out,
                const float* lse, const AttnShape& s, bool deterministic = true);

  // Builds (or finds) the plan for the shape and says how it went; the probe (bench-attention) prints it.
  CudnnPlanInfo plan_info(bool backward, const AttnShape& s, bool deterministic = true);

  struct Graph;  // one finalized (or failed) graph: descriptors, plan, scalar values, side tensors

 private:
  using Key = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, uint32_t, bool>;
  Graph& graph(bool backward, const AttnShape& s, bool deterministic);
  bool reserve_workspace(Graph& g);  // grows the workspace to g's; false (and g is dropped) when that fails

  cudaStream_t stream_;
  Alloc alloc_;
  Free free_;
  void* handle_ = nullptr;  // cudnnHandle_t, created on first use
  bool handle_tried_ = false;
  std::string handle_error_;
  std::vector<std::unique_ptr<Graph>> graphs_;  // a few shapes per run: found by a linear search
  void* workspace_ = nullptr;
  int64_t workspace_bytes_ = 0;
};

// Zeroes the rows of x [batch·seq, width] at padded positions (i >= s.seq_lens[b], which must be set) and, where lse
// is given, lse [batch, n_heads, seq] there (cudnn_attention_padding.cu).
void zero_padded_attention_rows(__nv_bfloat16* x, int64_t width, float* lse, const AttnShape& s, cudaStream_t stream);

}  // namespace mt::cuda
