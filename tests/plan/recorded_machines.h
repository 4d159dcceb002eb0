// What the plan tests take as the machines we measured on: the memory an H100 80 GB and the H200 report, the H100's
// probe figures (issue #49; docs/PERFORMANCE.md), and `megatrain bench`'s run shape before resolve_auto.
#pragma once
#include <cstdint>

#include "plan/memory_plan.h"
#include "plan/step_rates.h"

namespace mt_test {

inline constexpr int64_t kH100 = int64_t{81559} << 20;   // what an H100 80 GB reports
inline constexpr int64_t kH200 = int64_t{143771} << 20;  // what the H200 reports

// The H100's probe: GEMM 906 TFLOP/s, page-locked copies 55 GB/s each way, the parameters pass 11.12 G/s.
inline mt::StepRates h100_rates() {
  mt::MeasuredRates m;
  m.gemm_flops = 906e12;
  m.h2d_bytes = 55e9;
  m.d2h_bytes = 55e9;
  m.parameters_pass_params = 11.12e9;
  return mt::step_rates_of(m);
}

// `megatrain bench --seq S --batch B` (bf16, the fp32 master streamed, cuDNN attention), passes and micro-batch auto.
inline mt::RunShape bench_shape(int64_t batch, int64_t seq) {
  mt::RunShape r;
  r.dtype = mt::DType::bf16;
  r.stream_dtype = mt::DType::f32;
  r.seq_len = seq;
  r.batch_size = batch;
  r.passes = 0;
  r.micro_batch_size = 0;
  r.checkpoint_interval = 1;
  r.cudnn_attention = true;
  return r;
}

}  // namespace mt_test
