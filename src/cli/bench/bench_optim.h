// `megatrain bench-optim`: the optimizer step of the training run over P synthetic parameters, on every
// rank with the training run's binding and host store: the global-norm pass and AdamW, timed after warm-up as
// params/s and GB/s, both ways (optim/optimizer.h): fused (reads g, p, m, v, writes p, m, v and the bf16 copy:
// 28 B per parameter, 30 with the copy; what torch.optim.AdamW(fused=True) does in 28 B) and split (parameters
// pass 20 or 22 B, then moments pass 20 B), next to a copy over the same slices (8 B per parameter) as the
// bandwidth ceiling. With --offload (store.offload's modes) the state tier on --offload-paths: the fused update
// streamed through the tier, its state traffic in GB/s (each state byte read and written once a step) against the
// disk's ceiling that a probe measures on the same paths first (O_DIRECT write then read).
// Invariant: measures, never asserts; world rank 0 reports.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mt {

struct BenchOptimOptions {
  int64_t params = 0;
  int64_t steps = 10;
  int64_t warmup = 2;
  std::string dtype = "float32";    // the store's stream dtype: float32 (no copy, as train's default) or bfloat16
  int64_t region = int64_t{1} << 26;  // parameters per region (tools/bench_torch_adamw.py --chunk)
  std::string offload = "none";     // none | optimizer | optimizer+master
  std::vector<std::string> offload_paths;
  double probe_gb = 4.0;            // GB written then read per path by the disk probe
  bool json = false;
};

void run_bench_optim(const BenchOptimOptions& options);

}  // namespace mt
