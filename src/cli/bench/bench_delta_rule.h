// `megatrain bench-delta-rule`: the gated delta rule's forward and backward alone (the backend's op, the kernel the
// CUDA backend picks: chunked, or recurrent with MEGATRAIN_DELTA_RULE=recurrent), timed after warm-up on random
// inputs at a model's first linear-attention layer's heads (--model, an HF config.json or shape file) over
// --batch sequences of --seq tokens. Reports the median forward, backward and total times per call and per layer of
// the model, and the kernel's TFLOP/s in the chunked form's FLOP count.
// Invariant: measures, never asserts.
#pragma once
#include <cstdint>
#include <string>

namespace mt {

struct BenchDeltaRuleOptions {
  std::string model;
  std::string dtype = "bfloat16";
  int64_t batch = 8;
  int64_t seq = 4096;
  int64_t steps = 5;
  int64_t warmup = 2;
  bool json = false;
};

void run_bench_delta_rule(const BenchDeltaRuleOptions& options);

}  // namespace mt
