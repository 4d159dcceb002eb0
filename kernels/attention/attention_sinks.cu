// The attention sinks' gradient (GPT-OSS; semantics in backend.h): d_sinks[h] += −Σ over valid rows i of
// exp(sink_h − lse_i)·(dout_i·out_i). The sinks' forward is a variant of the attention kernels (kernels/attention/attention.cu);
// the sink has no value, so their backward needs nothing but this.
// Invariant: one block per head; each thread sums a fixed set of rows in order (fp64), then a fixed block
// reduction: deterministic, no atomics.
#include <cub/block/block_reduce.cuh>

#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int threads = 256;

template <typename T>
__global__ void attention_sinks_backward_kernel(float* d_sinks, const T* __restrict__ dout, const T* __restrict__ out,
                                                const float* __restrict__ lse, const T* __restrict__ sinks,
                                                const int32_t* seq_lens, int64_t batch, int64_t seq, int64_t n_heads,
                                                int64_t hd) {
  const int64_t h = blockIdx.x, rows = batch * seq, q_stride = n_heads * hd;
  const float sink = to_f32(sinks[h]);
  double acc = 0.0;
  for (int64_t t = threadIdx.x; t < rows; t += blockDim.x) {
    const int64_t b = t / seq, i = t % seq;
    if (seq_lens != nullptr && i >= seq_lens[b]) continue;
    const int64_t row = t * q_stride + h * hd;
    float d = 0.f;
    for (int64_t c = 0; c < hd; ++c) d += to_f32(dout[row + c]) * to_f32(out[row + c]);
    acc += static_cast<double>(expf(sink - lse[(b * n_heads + h) * seq + i]) * d);
  }
  using Reduce = cub::BlockReduce<double, threads>;
  __shared__ typename Reduce::TempStorage tmp;
  const double total = Reduce(tmp).Sum(acc);
  if (threadIdx.x == 0) d_sinks[h] -= static_cast<float>(total);
}

}  // namespace

template <typename T>
void attention_sinks_backward(float* d_sinks, const T* dout, const T* out, const float* lse, const AttnShape& shape,
                              cudaStream_t s) {
  MT_ASSERT(shape.sinks != nullptr && shape.batch > 0 && shape.seq > 0 && shape.n_heads > 0 && shape.head_dim > 0,
            "attention_sinks_backward: sinks {} batch {} seq {} n_heads {} head_dim {}", shape.sinks != nullptr,
            shape.batch, shape.seq, shape.n_heads, shape.head_dim);
  attention_sinks_backward_kernel<T><<<static_cast<unsigned>(shape.n_heads), threads, 0, s>>>(
      d_sinks, dout, out, lse, static_cast<const T*>(shape.sinks), shape.seq_lens, shape.batch, shape.seq,
      shape.n_heads, shape.v_head_dim > 0 ? shape.v_head_dim : shape.head_dim);  // out and dout rows: value dims
  MT_CHECK_LAUNCH("attention_sinks_backward", "batch={} seq={} n_heads={} head_dim={}", shape.batch, shape.seq,
                  shape.n_heads, shape.head_dim);
}

template void attention_sinks_backward<float>(float*, const float*, const float*, const float*, const AttnShape&,
                                              cudaStream_t);
template void attention_sinks_backward<__nv_bfloat16>(float*, const __nv_bfloat16*, const __nv_bfloat16*, const float*,
                                                      const AttnShape&, cudaStream_t);

}  // namespace mt::cuda
