// `megatrain bench`: training steps of a random-init model from a shape file (HF config.json) on random
// tokens, timed after warm-up, with the training run's ranks: under mpirun every rank of the node holds its
// slices and runs the overlapped optimizer, and the first --gpus-per-node ranks of each node train on their
// shares of the global batch (data parallelism, as `train`). World rank 0 reports per step and as medians:
// step time, tokens/s, TFLOP/s as 6 · parameters · tokens / step time, its H2D/D2H GB/s while copying, the
// time after backward until the optimizer has the norm (the update itself overlaps the next forward), the share of
// the step its compute stream did not wait for weights, its peak GPU memory and host bytes per parameter.
// --skip-update times the pipeline alone (no optimizer): the optimizer's cost is the difference.
// The plan's predicted step (plan/step_time.h, at the plan's rates or --gpu-tflops) and its parts are printed and
// put in the JSON next to the measured steady step, with the error in %. --offload puts the optimizer state on the
// NVMe tier (--offload-paths); a disk probe measures the paths' ceiling first, and the prediction is then the slower
// of that step and the state traffic at the probed bandwidth beside the forward.
// --moe-hot-expert makes routing imbalanced: every MoE layer's router row of expert 0 is scaled by 1000 after the
// random init, so that the tokens whose logit for it is positive (about half) all choose it; the busiest expert's share
// of a forward's tokens is reported either way.
// --stage dpo|kto times train's preference step (cli/bench/stage_steps.h): the reference pass over the bench's batches
// first (forward only, the starting weights), reported with its own time and tokens/s, then the steps; tokens count
// every sequence (a pair's chosen and rejected, a KTO example's completion and KL sequence).
// Invariant: measures, never asserts.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mt {

struct BenchOptions {
  std::string model;             // shape file or HF dir
  std::string dtype = "bfloat16";
  std::string stream_dtype = "float32";  // weights crossing PCIe: the fp32 master (16 B/parameter) or a bf16 copy (18)
  int64_t batch = 8;             // sequences per step (the global batch, over every GPU)
  int64_t seq = 1024;
  std::string stage = "sft";     // sft | dpo (--batch pairs) | kto (--batch examples, each with its KL sequence)
  std::string pref_loss = "sigmoid";  // dpo: training.pref_loss
  std::string pack;              // "LO-HI": each sequence packed with examples of LO..HI tokens (uniform); "": one each
  int64_t steps = 5;
  int64_t warmup = 2;
  int64_t checkpoint_interval = 1;
  int64_t recompute_layers = -1; // layers that recompute in backward (the first ones); -1 = as few as GPU memory allows
  int64_t moe_keep_layers = -1;  // MoE layers that keep their expert activations (the last ones); -1 = the plan's
  std::string activation_checkpoints = "auto";  // auto | gpu | host (training.activation_checkpoints)
  std::string optimizer_on_gpu = "auto";        // auto | off (training.optimizer_on_gpu)
  int64_t micro_batch = 0;       // 0 = auto
  int64_t passes = 0;            // gradient accumulation passes per step (0 = auto, as train)
  int64_t slots = 2;             // GPU weight slots
  int64_t layers = 0;            // override num_hidden_layers (0 = as the shape file says)
  int64_t first_layer = 0;       // with layers: the shape's layers [first_layer, first_layer + layers)
  int64_t gpus_per_node = 0;     // compute ranks per node (0 = one per visible GPU, up to the node's ranks)
  bool skip_update = false;      // no optimizer: the weights never change
  bool moe_hot_expert = false;   // expert 0 of every MoE layer chosen by about half of the tokens
  std::string offload = "none";  // store.offload: none | optimizer | optimizer+master
  std::vector<std::string> offload_paths;
  double probe_gb = 4.0;         // GB the disk probe writes then reads per path
  double gpu_tflops = 0.0;       // the step rate (StepRates::gpu_flops) for the predicted step; 0: the plan's (Run::rates)
  bool json = false;
};

void run_bench(const BenchOptions& options);

}  // namespace mt
