// Llama 4's attention temperature tuning, in place: row t × (log1p(floor((p + 1) / floor_scale))·attn_scale + 1),
// p = t % seq. Backward is the same launch on the gradient (the map is diagonal).
// Invariant: the factor is formed in fp32 with IEEE division and the same step order as the CPU reference
// (src/backend/cpu/attention_temperature.cpp), so the backends' factors differ at most by log1pf's 1 ulp; one block
// per row, deterministic.
#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int threads = 256;

template <typename T>
__global__ void attention_temperature_kernel(T* x, int64_t seq, int64_t width, float floor_scale, float attn_scale) {
  const int64_t t = blockIdx.x;
  const float p = static_cast<float>(t % seq) + 1.0f;
  const float factor = __fadd_rn(__fmul_rn(log1pf(floorf(__fdiv_rn(p, floor_scale))), attn_scale), 1.0f);
  T* row = x + t * width;
  for (int64_t d = threadIdx.x; d < width; d += threads) row[d] = from_f32<T>(__fmul_rn(to_f32(row[d]), factor));
}

}  // namespace

template <typename T>
void attention_temperature(T* x, int64_t tokens, int64_t seq, int64_t width, float floor_scale, float attn_scale,
                           cudaStream_t s) {
  MT_ASSERT(tokens >= 0 && seq > 0 && tokens % seq == 0 && width > 0 && floor_scale > 0.f,
            "attention_temperature: tokens {} seq {} width {} floor_scale {}", tokens, seq, width, floor_scale);
  MT_ASSERT(tokens <= 0x7fffffff, "attention_temperature: {} tokens exceed the grid", tokens);
  if (tokens == 0) return;
  attention_temperature_kernel<T><<<static_cast<unsigned>(tokens), threads, 0, s>>>(x, seq, width, floor_scale,
                                                                                   attn_scale);
  MT_CHECK_LAUNCH("attention_temperature", "tokens={} seq={} width={}", tokens, seq, width);
}

template void attention_temperature<float>(float*, int64_t, int64_t, int64_t, float, float, cudaStream_t);
template void attention_temperature<__nv_bfloat16>(__nv_bfloat16*, int64_t, int64_t, int64_t, float, float,
                                                   cudaStream_t);

}  // namespace mt::cuda
