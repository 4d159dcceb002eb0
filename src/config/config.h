// The typed run configuration (`megatrain train --config FILE --set section.key=value`).
// Invariant: a Config that load_config returns is fully validated; unknown keys and bad values never get this far.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/runtime_switches.h"

namespace mt {

struct ModelConfig {
  std::string name;                      // local HF dir, a hub id in the local HF cache, or a checkpoint file
  std::string dtype = "bfloat16";        // bfloat16 | float32
  std::string stream_dtype = "auto";     // auto (= float32) | bfloat16 | float32: the weights crossing PCIe
  std::string attn_implementation = "sdpa";  // flash_attention_2 | sdpa | eager
  bool trust_remote_code = false;
  std::string init = "pretrained";       // pretrained | random
};

struct DatasetConfig {
  std::string name;                      // entries of dataset_info.json, comma-separated
  std::string dataset_dir = "data";
  int64_t max_seq_len = 1024;
  bool shuffle = true;
  bool packing = false;
  int64_t num_workers = 2;
  std::string template_name = "auto";    // YAML key: template
  bool train_on_prompt = false;
  std::string eval_dataset;              // entries of dataset_info.json held out for evaluation ("" = none)
  double val_size = 0.0;                 // held out of dataset.name: a fraction < 1 or a count >= 1; 0 = none
  int64_t max_samples = 0;               // the first N records of each dataset; 0 = all
  bool streaming = false;                // training.stage pt: blocks read from the files as training goes
  int64_t preprocessing_batch_size = 0;  // training.stage pt: cut blocks per batch of N documents, each batch's
                                         // remainder dropped (LLaMA-Factory's); 0 = the whole corpus at once.
                                         // kto: the KL shift's blocks of N records; 0 = LLaMA-Factory's 1000
  std::string sample_by = "line";        // training.stage pt: a .txt file's documents are its lines, its paragraphs
                                         // or the whole file (Hugging Face datasets' text builder's sample_by)
};

struct TrainingConfig {
  int64_t batch_size = 32;               // sequences per optimizer step
  int64_t micro_batch_size = 0;          // 0 = auto (YAML: auto)
  int64_t gradient_accumulation_steps = 0;  // 0 = auto (YAML: auto): plan/pass_choice.h resolve_by_step
  int64_t gpus_per_node = 0;             // data-parallel compute ranks per node; 0 = auto (YAML: auto)
  std::string stage = "sft";             // sft (chat template, answers trained) | pt (plain text, every token trained)
                                         // | dpo (preference pairs: pref_loss over chosen and rejected responses)
                                         // | kto (unpaired examples with a kto_tag: KTO's loss)
  int64_t num_steps = 100;
  double num_train_epochs = 0.0;         // > 0: the run's length in epochs of the prepared dataset (replaces num_steps)
  double learning_rate = 1.0e-5;
  std::string lr_scheduler = "constant"; // constant | cosine | linear
  int64_t warmup_steps = 0;
  double warmup_ratio = 0.0;             // > 0: warmup_steps = ceil(ratio × the run's steps)
  double min_lr_ratio = 0.0;
  double weight_decay = 0.0;
  double max_grad_norm = 1.0;            // <= 0 disables clipping
  int64_t checkpoint_interval = 4;
  int64_t recompute_layers = -1;         // the first layers that recompute in backward, the rest save their
                                         // internals; -1 = auto (YAML: auto): as few as GPU memory allows
  int64_t moe_keep_layers = -1;          // the last MoE layers that keep their expert activations instead of
                                         // recomputing them; -1 = auto (plan/step_plan.h: by predicted step time)
  std::string activation_checkpoints = "auto";  // auto | gpu | host (engine/checkpoint_placement.h): auto puts them
                                         // in page-locked host RAM where they do not fit the GPU
  std::string optimizer_on_gpu = "auto";  // auto | off (plan/resident_plan.h): auto keeps the leading layers'
                                         // fp32 master, Adam moments and gradient in the GPU memory the plan leaves
                                         // free, updated there (one rank on the node, one GPU, no store.offload)
  uint64_t seed = 42;
  std::string output_dir = "output";
  int64_t logging_steps = 1;
  int64_t save_steps = 0;
  int64_t save_total_limit = 0;
  bool save_hf_checkpoints = false;      // each save also writes <output_dir>/checkpoint-<step>/, a Hugging Face
                                         // directory (LLaMA-Factory's layout); save_total_limit applies to both
  int64_t eval_steps = 0;                // evaluate every N steps (and after the last) when there is an eval set
  std::vector<std::string> report_to;    // trackers: tensorboard (YAML: none | tensorboard | [tensorboard])
  bool plot_loss = false;                // training_loss.png (and training_eval_loss.png) at the end
  std::string resume_from;               // "" | auto | path (a checkpoint file, or a directory: its newest one)
  int64_t max_consecutive_skipped_steps = 10;  // this many steps in a row skipped for a non-finite gradient norm
                                         // end the run with an error, before any final model (0: never)
  bool overwrite_output_dir = false;     // an output_dir holding another run's checkpoints: start over (they are
                                         // removed) instead of refusing (cli/train/resume.h)
  double moe_aux_loss_coef = -1.0;       // MoE router loss coefficient (LLaMA-Factory's name); set (>= 0): on,
                                         // overriding router_aux_loss_coef; -1 = auto (YAML: auto): config.json's
                                         // output_router_logits and router_aux_loss_coef decide
  // stage dpo and kto, with LLaMA-Factory's names and defaults (engine/preference_loss.h, engine/kto_loss.h):
  std::string pref_loss = "sigmoid";     // sigmoid (DPO) | hinge | ipo | orpo | simpo
  double pref_beta = 0.1;
  double pref_ftx = 0.0;                 // + pref_ftx × the chosen response's mean token cross-entropy
  double dpo_label_smoothing = 0.0;      // sigmoid only (cDPO), in [0, 0.5)
  double simpo_gamma = 0.5;              // simpo's target reward margin
  double kto_chosen_weight = 1.0;        // kto: the desirable examples' loss weight
  double kto_rejected_weight = 1.0;      // kto: the undesirable examples' loss weight
  std::string ref_model;                 // "" = the starting weights; else a model directory of the same
                                         // architecture and vocabulary (sigmoid, hinge, ipo, kto; orpo and simpo
                                         // use none)
};

struct OptimizerConfig {
  std::string type = "adamw";            // deepspeed_adam | adamw
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1.0e-8;
};

struct StoreConfig {
  std::string offload = "none";          // none | optimizer | optimizer+master (store/offload_mode.h)
  std::vector<std::string> offload_paths;  // directories of the NVMe state tier (YAML: a list, or comma-separated)
};

struct Config {
  ModelConfig model;
  DatasetConfig dataset;
  TrainingConfig training;
  OptimizerConfig optimizer;
  StoreConfig store;
  RuntimeSwitches runtime;               // `runtime:` with the MEGATRAIN_* variables over it (read once, here);
                                         // backend is the environment's alone (ranks pick it before the config)
  std::string yaml_text;                 // the effective configuration, as YAML (overrides applied)
  std::filesystem::path source;          // the file it came from ("" when built in code)
};

// Reads FILE, applies `section.key=value` overrides in order, validates. Throws mt::Error naming
// the file and the key's path (e.g. "config.yaml: training.batch_sise: unknown key; accepted: ...").
// The weights' dtype in host RAM that streams to the compute backend: model.stream_dtype; auto = float32 (the
// fp32 master itself, cast where bf16 compute uses it: 16 B/parameter, no bf16 copy).
DType stream_dtype_of(const Config& config);

// A LLaMA-Factory training YAML (config/llamafactory_config.h) is accepted too: converted, its ignored keys named in
// one warning.
Config load_config(const std::filesystem::path& file, const std::vector<std::string>& overrides = {});
// The same from YAML text (`origin` names it in messages).
Config parse_config(const std::string& yaml_text, const std::string& origin,
                    const std::vector<std::string>& overrides = {});
// Every accepted key as "section.key", in schema order (frozen by a test).
std::vector<std::string> accepted_config_keys();
// The configuration as YAML text (all keys, effective values).
std::string config_to_yaml(const Config& config);

}  // namespace mt
