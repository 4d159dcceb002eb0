// The cuDNN attention tests' shared rows and checks (test_cuda_cudnn_*.cpp): a CudnnAttention on the tests' stream,
// bf16-rounded inputs, the CPU reference's forward and backward, the op table's cases with their shapes on the host
// and on the GPU, and one case's check of cuDNN against the reference. Invariant: every buffer lives on the tests'
// stream and every comparison is against the fp32 reference of the rounded inputs.
#pragma once
#ifdef MEGATRAIN_HAVE_CUDNN
#include <cuda_bf16.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "kernels/attention/cudnn_attention.h"
#include "backend/segment_batch.h"
#include "gpu/gpu_test_util.h"

namespace mt::test {

using bf16 = __nv_bfloat16;

// A CudnnAttention on the tests' stream whose workspace comes from cudaMalloc, under `switches` (by default the
// environment's when it is made: a test sets a switch's variable for a scope (Env), then makes the instance).
std::unique_ptr<mt::cuda::CudnnAttention> make_cudnn(const mt::RuntimeSwitches& switches = mt::environment_switches());
// One CudnnAttention per set of switches, made on first use: current() is the one of the environment's switches now
// (a scope's Env), so that each graph is built once per switches however often a test returns to them.
class CudnnPerSwitches {
 public:
  mt::cuda::CudnnAttention& current();

 private:
  std::vector<std::pair<mt::RuntimeSwitches, std::unique_ptr<mt::cuda::CudnnAttention>>> made_;
};

// One attention call's inputs rounded to bf16: q and k of `magnitude`, v and dout, from seeds seed .. seed + 3; v of
// v_size and dout of o_size elements (-1: kv_size and q_size; latent attention's value head dim makes them smaller).
struct Inputs {
  std::vector<float> q, k, v, dout;
};

Inputs inputs(int64_t q_size, int64_t kv_size, uint32_t seed, float magnitude = 1.f, int64_t v_size = -1,
              int64_t o_size = -1);

// The CPU reference's forward (out, lse) and backward (dq, dk, dv; d_sinks where the shape has sinks) of one
// attention call on host data.
struct Reference {
  std::vector<float> out, lse, dq, dk, dv, d_sinks;
};

Reference reference(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                    const std::vector<float>& dout, const mt::AttnShape& host);

// The sinks' gradient on the GPU (the CUDA backend's attention_sinks_backward) from a forward's out and lse.
std::vector<float> sinks_gradient(const DeviceBuffer<bf16>& dout, const DeviceBuffer<bf16>& out,
                                  const DeviceBuffer<float>& lse, const mt::AttnShape& dev);

// One forward and backward through a Backend's attention ops (bf16), host data in and out; the shape's seq_lens
// (host memory) are uploaded for the call.
Reference through_backend(mt::Backend& be, const std::vector<float>& q, const std::vector<float>& k,
                          const std::vector<float>& v, const std::vector<float>& dout, const mt::AttnShape& host,
                          const std::vector<int32_t>& lens);

// Sets an environment variable for one scope.
struct Env {
  const char* name;
  Env(const char* n, const char* value) : name(n) { setenv(n, value, 1); }
  ~Env() { unsetenv(name); }
};

// A row of the op table (cudnn_cases).
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
  int64_t v_head_dim = 0;  // latent attention's value head dim (0: head_dim)
  int64_t value_head_dim() const { return v_head_dim > 0 ? v_head_dim : head_dim; }
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

CaseShapes case_shapes(const CudnnCase& c);

// The op table's rows.
const std::vector<CudnnCase>& cudnn_cases();

// How many elements of v [batch, seq, row_width] past each sequence's length are not 0.
int64_t nonzero_padding(const std::vector<float>& v, const CudnnCase& c, int64_t row_width);

// Why cudnn-frontend refuses a graph the backward of dev may run (cudnn_frontend_gap of its padded graph at the
// bucket or tile length, or of a packed call's group; empty where it refuses none): the one refusal the op table
// expects. Where it is empty cuDNN runs the backward; where not, our kernel runs whatever call needs that graph (a
// ragged call does not).
std::string backward_refusal(mt::cuda::CudnnAttention& cudnn, const mt::AttnShape& dev);

// One case's forward and backward on cuDNN against the CPU reference (inputs from seed): out, lse and the gradients
// within bf16 tolerance, padded rows exactly 0 (the outputs start as NaN bits), the deterministic backward bit for bit
// on a repeat, each implementation's forward paired with the other's backward, and with sinks d_sinks from cuDNN's
// out and lse. Where cuDNN refuses the backward (backward_refusal must say why) our kernel's, which the dispatch runs
// there, takes its place in every check.
void check_against_reference(mt::cuda::CudnnAttention& cudnn, const CudnnCase& c, const mt::AttnShape& host,
                             const mt::AttnShape& dev, uint32_t seed);

// A packed case: a row's shape with its sequences cut into segments.
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
// The case's ids and layout, built on the host as the engine builds them and uploaded; shapes' host and dev get its
// segments (and dev its virtual batch).
std::unique_ptr<SegmentShapes> segment_shapes(const SegmentCase& sc, CaseShapes& shapes);

}  // namespace mt::test
#endif  // MEGATRAIN_HAVE_CUDNN
