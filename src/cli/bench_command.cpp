// `megatrain bench --model SHAPE [--batch B] [--seq S] [--steps N] ...` (see cli/bench/bench.h).
#include <limits>
#include <memory>

#include "cli/command.h"
#include "cli/numeric_flag.h"
#include "cli/bench/bench.h"

namespace mt {

void add_bench_command(CLI::App& root, std::vector<Command>& commands) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* app = root.add_subcommand("bench", "time training steps of a random-init model on random tokens");
  app->add_option("--model", o->model, "shape file (configs/models/*.json) or model directory")->required();
  app->add_option("--dtype", o->dtype, "bfloat16 or float32")->capture_default_str();
  app->add_option("--stream-dtype", o->stream_dtype,
                  "weights in host RAM that cross PCIe: float32 (the fp32 master, cast on the GPU, 16 B/parameter) or "
                  "bfloat16 (a bf16 copy, 18 B/parameter, half the H2D bytes)")
      ->capture_default_str();
  app->add_option("--stage", o->stage,
                  "the training step to time: sft, dpo (--batch pairs of a chosen and a rejected sequence of --seq "
                  "tokens sharing a prompt of half of them, after the reference pass) or kto (--batch examples, each "
                  "with its KL sequence, after the reference pass)")
      ->capture_default_str()->check(CLI::IsMember({"sft", "dpo", "kto"}));
  app->add_option("--pref-loss", o->pref_loss, "dpo: training.pref_loss")
      ->capture_default_str()->check(CLI::IsMember({"sigmoid", "hinge", "ipo", "orpo", "simpo"}));
  app->add_option("--batch", o->batch, "sequences per step (pairs for dpo, examples for kto)")->capture_default_str()->check(integer_in(1));
  app->add_option("--seq", o->seq, "tokens per sequence")->capture_default_str()->check(integer_in(1));
  app->add_option("--pack", o->pack,
                  "LO-HI: pack each sequence with random examples of LO to HI tokens, as data.packing does (attention "
                  "stays within each; model FLOPs count each example's own keys)");
  app->add_option("--steps", o->steps, "measured steps")->capture_default_str()->check(integer_in(1));
  app->add_option("--warmup", o->warmup, "unmeasured steps first")->capture_default_str()->check(integer_in(0));
  app->add_option("--checkpoint-interval", o->checkpoint_interval, "layers per recompute segment")
      ->capture_default_str()->check(integer_in(1));
  app->add_option("--recompute-layers", o->recompute_layers,
                  "the first layers recompute their activations in backward, the rest keep them (-1 = as train's auto: "
                  "as few as the GPU's memory allows, or more for resident optimizer state where the step is shorter)")
      ->capture_default_str()->check(integer_in(-1));
  app->add_option("--moe-keep-layers", o->moe_keep_layers,
                  "the last MoE layers keep their expert activations for backward instead of recomputing them "
                  "(training.moe_keep_layers; -1 = the plan's choice by predicted step time)")
      ->capture_default_str()->check(integer_in(-1));
  app->add_flag("--moe-hot-expert", o->moe_hot_expert,
               "imbalanced routing: every MoE layer's router row of expert 0 scaled by 1000 after the random init, so "
               "that about half of the tokens choose it (every token still reaches its top-k experts)");
  app->add_option("--activation-checkpoints", o->activation_checkpoints,
                  "where the activation checkpoints live: auto (host RAM where they do not fit the GPU), gpu or host "
                  "(page-locked host RAM, copied asynchronously)")
      ->capture_default_str()->check(CLI::IsMember({"auto", "gpu", "host"}));
  app->add_option("--optimizer-on-gpu", o->optimizer_on_gpu,
                  "auto: the leading layers' optimizer state stays in the GPU memory the plan leaves free and the GPU "
                  "updates it (training.optimizer_on_gpu); off: every update on the CPU")
      ->capture_default_str()->check(CLI::IsMember({"auto", "off"}));
  app->add_option("--micro-batch", o->micro_batch, "sequences per micro-batch (0 = auto)")->capture_default_str()->check(integer_in(0));
  app->add_option("--passes", o->passes,
                  "gradient accumulation passes per step (gradient_accumulation_steps; 0 = auto, as train)")
      ->capture_default_str()->check(integer_in(0));
  app->add_option("--slots", o->slots, "GPU weight slots (>= 2)")->capture_default_str()->check(integer_in(2, 64));
  app->add_option("--layers", o->layers, "override the number of layers (0 = as the shape says)")->capture_default_str()->check(integer_in(0));
  app->add_option("--first-layer", o->first_layer,
                  "with --layers: the shape's layers from this one on (e.g. DeepSeek-V3's MoE layers from 3)")
      ->capture_default_str()->check(integer_in(0));
  app->add_option("--gpus-per-node", o->gpus_per_node,
                  "data-parallel GPU ranks per node under mpirun (0 = one per visible GPU, up to the node's ranks)")
      ->capture_default_str()->check(integer_in(0));
  app->add_flag("--skip-update", o->skip_update, "no optimizer (the pipeline alone; the weights never change)");
  app->add_option("--offload", o->offload, "store.offload: none (default), optimizer or optimizer+master");
  app->add_option("--offload-paths", o->offload_paths, "the state tier's directories (one per NVMe device)")
      ->delimiter(',');
  app->add_option("--probe-gb", o->probe_gb, "GB the disk probe writes then reads per path (default 4)")
      ->check(positive_real());
  app->add_option("--gpu-tflops", o->gpu_tflops,
                  "the GPU rate in model TFLOP/s for the predicted step time (default: the plan's step rates)");
  app->add_flag("--json", o->json, "one JSON object on stdout");
  commands.push_back({app, [o] { run_bench(*o); }});
}

}  // namespace mt
