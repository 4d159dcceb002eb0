// Tests of the run configuration: defaults, the frozen key set, every kind of error message, overrides, round trip.
// Invariant: all YAML is inline text or files under a fresh temporary directory; nothing else is read.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "catch.h"
#include "config/config.h"
#include "core/error.h"

namespace {

const std::string kMinimal = "model:\n  name: tiny-llama\ndataset:\n  name: alpaca_en\n";

const std::string kFull = R"(model:
  name: /models/Qwen2.5-7B
  dtype: float32
  attn_implementation: eager
  trust_remote_code: true
  init: random
dataset:
  name: alpaca_en,identity
  dataset_dir: /data/sets
  max_seq_len: 2048
  shuffle: false
  packing: true
  num_workers: 0
  template: qwen
  train_on_prompt: true
training:
  batch_size: 64
  micro_batch_size: 4
  gradient_accumulation_steps: 4
  num_steps: 500
  learning_rate: 2.0e-5
  lr_scheduler: cosine
  warmup_steps: 20
  min_lr_ratio: 0.1
  weight_decay: 0.01
  max_grad_norm: 0
  checkpoint_interval: 8
  seed: 1234
  output_dir: runs/qwen
  logging_steps: 5
  save_steps: 100
  save_total_limit: 3
  resume_from: auto
optimizer:
  type: deepspeed_adam
  beta1: 0.8
  beta2: 0.95
  eps: 1e-6
)";

// The message of the mt::Error that parsing `text` with `overrides` throws ("" when it does not throw).
std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    mt::parse_config(text, "cfg.yaml", overrides);
  } catch (const mt::Error& e) {
    return e.what();
  }
  return "";
}

// The minimal config plus `section:\n  key: value\n` (training and optimizer only: the others are in kMinimal).
std::string with(const std::string& section, const std::string& key, const std::string& value) {
  return kMinimal + section + ":\n  " + key + ": " + value + "\n";
}

void check_same(const mt::Config& a, const mt::Config& b) {
  CHECK(a.model.name == b.model.name);
  CHECK(a.model.dtype == b.model.dtype);
  CHECK(a.model.attn_implementation == b.model.attn_implementation);
  CHECK(a.model.trust_remote_code == b.model.trust_remote_code);
  CHECK(a.model.init == b.model.init);
  CHECK(a.dataset.name == b.dataset.name);
  CHECK(a.dataset.dataset_dir == b.dataset.dataset_dir);
  CHECK(a.dataset.max_seq_len == b.dataset.max_seq_len);
  CHECK(a.dataset.shuffle == b.dataset.shuffle);
  CHECK(a.dataset.packing == b.dataset.packing);
  CHECK(a.dataset.num_workers == b.dataset.num_workers);
  CHECK(a.dataset.template_name == b.dataset.template_name);
  CHECK(a.dataset.train_on_prompt == b.dataset.train_on_prompt);
  CHECK(a.training.batch_size == b.training.batch_size);
  CHECK(a.training.micro_batch_size == b.training.micro_batch_size);
  CHECK(a.training.gradient_accumulation_steps == b.training.gradient_accumulation_steps);
  CHECK(a.training.num_steps == b.training.num_steps);
  CHECK(a.training.learning_rate == b.training.learning_rate);
  CHECK(a.training.lr_scheduler == b.training.lr_scheduler);
  CHECK(a.training.warmup_steps == b.training.warmup_steps);
  CHECK(a.training.min_lr_ratio == b.training.min_lr_ratio);
  CHECK(a.training.weight_decay == b.training.weight_decay);
  CHECK(a.training.max_grad_norm == b.training.max_grad_norm);
  CHECK(a.training.checkpoint_interval == b.training.checkpoint_interval);
  CHECK(a.training.seed == b.training.seed);
  CHECK(a.training.output_dir == b.training.output_dir);
  CHECK(a.training.logging_steps == b.training.logging_steps);
  CHECK(a.training.save_steps == b.training.save_steps);
  CHECK(a.training.save_total_limit == b.training.save_total_limit);
  CHECK(a.training.resume_from == b.training.resume_from);
  CHECK(a.optimizer.type == b.optimizer.type);
  CHECK(a.optimizer.beta1 == b.optimizer.beta1);
  CHECK(a.optimizer.beta2 == b.optimizer.beta2);
  CHECK(a.optimizer.eps == b.optimizer.eps);
}

}  // namespace

TEST_CASE("config: a minimal file takes every default", "[config]") {
  mt::Config c = mt::parse_config(kMinimal, "cfg.yaml");
  mt::Config defaults;
  defaults.model.name = "tiny-llama";
  defaults.dataset.name = "alpaca_en";
  check_same(c, defaults);
  CHECK(c.model.dtype == "bfloat16");
  CHECK(c.training.micro_batch_size == 0);
  CHECK(c.training.seed == 42);
  CHECK(c.training.learning_rate == 1.0e-5);
  CHECK(c.source.empty());
  CHECK(c.yaml_text == mt::config_to_yaml(c));
}

TEST_CASE("config: a full file sets every key", "[config]") {
  mt::Config c = mt::parse_config(kFull, "cfg.yaml");
  CHECK(c.model.name == "/models/Qwen2.5-7B");
  CHECK(c.model.dtype == "float32");
  CHECK(c.model.attn_implementation == "eager");
  CHECK(c.model.trust_remote_code);
  CHECK(c.model.init == "random");
  CHECK(c.dataset.name == "alpaca_en,identity");
  CHECK(c.dataset.dataset_dir == "/data/sets");
  CHECK(c.dataset.max_seq_len == 2048);
  CHECK_FALSE(c.dataset.shuffle);
  CHECK(c.dataset.packing);
  CHECK(c.dataset.num_workers == 0);
  CHECK(c.dataset.template_name == "qwen");
  CHECK(c.dataset.train_on_prompt);
  CHECK(c.training.batch_size == 64);
  CHECK(c.training.micro_batch_size == 4);
  CHECK(c.training.gradient_accumulation_steps == 4);
  CHECK(c.training.num_steps == 500);
  CHECK(c.training.learning_rate == 2.0e-5);
  CHECK(c.training.lr_scheduler == "cosine");
  CHECK(c.training.warmup_steps == 20);
  CHECK(c.training.min_lr_ratio == 0.1);
  CHECK(c.training.weight_decay == 0.01);
  CHECK(c.training.max_grad_norm == 0.0);
  CHECK(c.training.checkpoint_interval == 8);
  CHECK(c.training.seed == 1234);
  CHECK(c.training.output_dir == "runs/qwen");
  CHECK(c.training.logging_steps == 5);
  CHECK(c.training.save_steps == 100);
  CHECK(c.training.save_total_limit == 3);
  CHECK(c.training.resume_from == "auto");
  CHECK(c.optimizer.type == "deepspeed_adam");
  CHECK(c.optimizer.beta1 == 0.8);
  CHECK(c.optimizer.beta2 == 0.95);
  CHECK(c.optimizer.eps == 1e-6);
}

TEST_CASE("config: the accepted keys are frozen", "[config]") {
  const std::vector<std::string> frozen = {
      "model.name",
      "model.dtype",
      "model.stream_dtype",
      "model.attn_implementation",
      "model.trust_remote_code",
      "model.init",
      "dataset.name",
      "dataset.dataset_dir",
      "dataset.max_seq_len",
      "dataset.shuffle",
      "dataset.packing",
      "dataset.num_workers",
      "dataset.template",
      "dataset.train_on_prompt",
      "dataset.eval_dataset",
      "dataset.val_size",
      "dataset.max_samples",
      "dataset.streaming",
      "dataset.preprocessing_batch_size",
      "dataset.sample_by",
      "training.batch_size",
      "training.micro_batch_size",
      "training.gradient_accumulation_steps",
      "training.gpus_per_node",
      "training.stage",
      "training.num_steps",
      "training.num_train_epochs",
      "training.learning_rate",
      "training.lr_scheduler",
      "training.warmup_steps",
      "training.warmup_ratio",
      "training.min_lr_ratio",
      "training.weight_decay",
      "training.max_grad_norm",
      "training.checkpoint_interval",
      "training.recompute_layers",
      "training.moe_keep_layers",
      "training.activation_checkpoints",
      "training.optimizer_on_gpu",
      "training.seed",
      "training.output_dir",
      "training.logging_steps",
      "training.save_steps",
      "training.save_total_limit",
      "training.save_hf_checkpoints",
      "training.eval_steps",
      "training.report_to",
      "training.plot_loss",
      "training.resume_from",
      "training.overwrite_output_dir",
      "training.max_consecutive_skipped_steps",
      "training.moe_aux_loss_coef",
      "training.pref_loss",
      "training.pref_beta",
      "training.pref_ftx",
      "training.dpo_label_smoothing",
      "training.simpo_gamma",
      "training.kto_chosen_weight",
      "training.kto_rejected_weight",
      "training.ref_model",
      "optimizer.type",
      "optimizer.beta1",
      "optimizer.beta2",
      "optimizer.eps",
      "store.offload",
      "store.offload_paths",
      "runtime.attention",
      "runtime.cudnn_seq_buckets",
      "runtime.cudnn_ragged",
      "runtime.attention_deterministic",
      "runtime.cudnn_backward_tile",
      "runtime.cudnn_workspace_mib",
      "runtime.moe_gemm",
      "runtime.moe_gemm_streams",
      "runtime.delta_rule",
      "runtime.profile_ops",
      "runtime.tier_io",
      "runtime.step_rates",
  };
  CHECK(mt::accepted_config_keys() == frozen);
}

TEST_CASE("config: an unknown key names its path and the accepted keys", "[config]") {
  std::string msg = error_of(with("training", "batch_sise", "8"));
  CHECK(msg.rfind("cfg.yaml: unknown key 'training.batch_sise' (accepted: batch_size, micro_batch_size, ", 0) == 0);
  CHECK(msg.find("resume_from, overwrite_output_dir, max_consecutive_skipped_steps, moe_aux_loss_coef, pref_loss, "
                 "pref_beta, pref_ftx, dpo_label_smoothing, simpo_gamma, kto_chosen_weight, kto_rejected_weight, "
                 "ref_model)") != std::string::npos);
  CHECK(msg.find('\n') == std::string::npos);
}

TEST_CASE("config: an unknown section is an error", "[config]") {
  CHECK(error_of(kMinimal + "trainng:\n  batch_size: 8\n") ==
        "cfg.yaml: unknown section 'trainng' (accepted: model, dataset, training, optimizer, store, runtime)");
  CHECK(error_of(kMinimal + "extras:\n") ==
        "cfg.yaml: unknown section 'extras' (accepted: model, dataset, training, optimizer, store, runtime)");
}

TEST_CASE("config: a top level or section that is not a map is an error", "[config]") {
  CHECK(error_of("- model\n- dataset\n").find("cfg.yaml: the top level must be a map") == 0);
  CHECK(error_of(kMinimal + "training: 5\n") == "cfg.yaml: section 'training' must be a map of keys, not '5'");
  CHECK(error_of(kMinimal + "training:\n  batch_size: 8\n  batch_size: 16\n") ==
        "cfg.yaml: duplicate key 'training.batch_size'");
}

TEST_CASE("config: a bad choice lists the choices", "[config]") {
  CHECK(error_of(with("training", "lr_scheduler", "cosin")) ==
        "cfg.yaml: training.lr_scheduler: 'cosin' is not one of constant, cosine, linear (or constant_with_warmup, "
        "cosine_with_min_lr)");
  CHECK(error_of(with("optimizer", "type", "adam")) ==
        "cfg.yaml: optimizer.type: 'adam' is not one of deepspeed_adam, adamw");
  CHECK(error_of(with("training", "optimizer_on_gpu", "on")) ==
        "cfg.yaml: training.optimizer_on_gpu: 'on' is not one of auto, off");
  CHECK(mt::parse_config(with("training", "optimizer_on_gpu", "off"), "cfg.yaml").training.optimizer_on_gpu == "off");
  CHECK(mt::parse_config(kMinimal, "cfg.yaml").training.optimizer_on_gpu == "auto");
  CHECK(error_of(kMinimal, {"model.dtype=fp16"}) ==
        "--set model.dtype=fp16: model.dtype: 'fp16' is not one of bfloat16, float32 (or bf16, fp32)");
}

TEST_CASE("config: dtype aliases are normalised", "[config]") {
  CHECK(mt::parse_config(kMinimal, "cfg.yaml", {"model.dtype=bf16"}).model.dtype == "bfloat16");
  CHECK(mt::parse_config(kMinimal, "cfg.yaml", {"model.dtype=fp32"}).model.dtype == "float32");
}

TEST_CASE("config: a value of the wrong type is an error", "[config]") {
  CHECK(error_of(with("training", "batch_size", "eight")) ==
        "cfg.yaml: training.batch_size: 'eight' is not an integer >= 1");
  CHECK(error_of(with("training", "batch_size", "4.0")) ==
        "cfg.yaml: training.batch_size: '4.0' is not an integer >= 1");
  CHECK(error_of(with("training", "num_steps", "[1, 2]")) ==
        "cfg.yaml: training.num_steps: a sequence is not an integer >= 1");
  CHECK(error_of(with("training", "learning_rate", "fast")) ==
        "cfg.yaml: training.learning_rate: 'fast' is not a number >= 0");
  CHECK(error_of("model:\n  name: m\n  trust_remote_code: maybe\ndataset:\n  name: d\n") ==
        "cfg.yaml: model.trust_remote_code: 'maybe' is not a boolean (true or false)");
  CHECK(error_of(with("training", "seed", "-1")) == "cfg.yaml: training.seed: '-1' is not a non-negative integer");
  CHECK(error_of(with("training", "output_dir", "''")) ==
        "cfg.yaml: training.output_dir: '' is not a non-empty string");
}

TEST_CASE("config: a value out of range is an error", "[config]") {
  CHECK(error_of(with("training", "batch_size", "0")) == "cfg.yaml: training.batch_size: '0' is not an integer >= 1");
  CHECK(error_of(with("optimizer", "beta1", "1.0")) == "cfg.yaml: optimizer.beta1: '1.0' is not a number in [0, 1)");
  CHECK(error_of(with("optimizer", "eps", "0")) == "cfg.yaml: optimizer.eps: '0' is not a number > 0");
  CHECK(error_of(with("training", "min_lr_ratio", "1.5")) ==
        "cfg.yaml: training.min_lr_ratio: '1.5' is not a number in [0, 1]");
  CHECK(error_of(with("training", "max_grad_norm", ".nan")) ==
        "cfg.yaml: training.max_grad_norm: '.nan' is not a finite number");
  CHECK(error_of(kMinimal + "training:\n  batch_size: 32\n  gradient_accumulation_steps: 3\n") ==
        "cfg.yaml: training.gradient_accumulation_steps: 3 does not divide training.batch_size 32");
}

TEST_CASE("config: numbers in either float spelling, negative max_grad_norm", "[config]") {
  CHECK(mt::parse_config(with("training", "learning_rate", "1e-5"), "cfg.yaml").training.learning_rate == 1e-5);
  CHECK(mt::parse_config(with("training", "learning_rate", "1.0e-5"), "cfg.yaml").training.learning_rate == 1e-5);
  CHECK(mt::parse_config(with("training", "learning_rate", "3"), "cfg.yaml").training.learning_rate == 3.0);
  CHECK(mt::parse_config(with("training", "max_grad_norm", "-1"), "cfg.yaml").training.max_grad_norm == -1.0);
}

TEST_CASE("config: micro_batch_size is auto or a positive integer", "[config]") {
  CHECK(mt::parse_config(with("training", "micro_batch_size", "auto"), "cfg.yaml").training.micro_batch_size == 0);
  CHECK(mt::parse_config(with("training", "micro_batch_size", "4"), "cfg.yaml").training.micro_batch_size == 4);
  CHECK(error_of(with("training", "micro_batch_size", "0")) ==
        "cfg.yaml: training.micro_batch_size: '0' is not auto or an integer >= 1");
}

TEST_CASE("config: gradient_accumulation_steps is auto (the default) or a divisor of batch_size", "[config]") {
  CHECK(mt::parse_config(kMinimal, "cfg.yaml").training.gradient_accumulation_steps == 0);
  CHECK(mt::parse_config(with("training", "gradient_accumulation_steps", "auto"), "cfg.yaml")
            .training.gradient_accumulation_steps == 0);
  CHECK(mt::parse_config(with("training", "gradient_accumulation_steps", "4"), "cfg.yaml")
            .training.gradient_accumulation_steps == 4);
  CHECK(error_of(with("training", "gradient_accumulation_steps", "0")) ==
        "cfg.yaml: training.gradient_accumulation_steps: '0' is not auto or an integer >= 1");
  CHECK(mt::parse_config(kMinimal, "cfg.yaml").yaml_text.find("gradient_accumulation_steps: auto\n") !=
        std::string::npos);
}

TEST_CASE("config: moe_keep_layers is auto or a layer count from 0", "[config]") {
  CHECK(mt::parse_config(with("training", "moe_keep_layers", "auto"), "cfg.yaml").training.moe_keep_layers == -1);
  CHECK(mt::parse_config(with("training", "moe_keep_layers", "3"), "cfg.yaml").training.moe_keep_layers == 3);
  CHECK(error_of(with("training", "moe_keep_layers", "-2")) ==
        "cfg.yaml: training.moe_keep_layers: '-2' is not auto or an integer >= 0");
  CHECK(mt::parse_config(kMinimal, "cfg.yaml").yaml_text.find("moe_keep_layers: auto\n") != std::string::npos);
}

TEST_CASE("config: recompute_layers is auto or a layer count from 0", "[config]") {
  CHECK(mt::parse_config(with("training", "recompute_layers", "auto"), "cfg.yaml").training.recompute_layers == -1);
  CHECK(mt::parse_config(with("training", "recompute_layers", "0"), "cfg.yaml").training.recompute_layers == 0);
  CHECK(mt::parse_config(with("training", "recompute_layers", "12"), "cfg.yaml").training.recompute_layers == 12);
  CHECK(error_of(with("training", "recompute_layers", "-1")) ==
        "cfg.yaml: training.recompute_layers: '-1' is not auto or an integer >= 0");
  const mt::Config c = mt::parse_config(with("training", "recompute_layers", "0"), "cfg.yaml");
  CHECK(c.yaml_text.find("recompute_layers: 0\n") != std::string::npos);
}

TEST_CASE("config: overrides apply in order after the file", "[config]") {
  mt::Config c =
      mt::parse_config(kFull, "cfg.yaml",
                       {"training.num_steps=5", "model.dtype=bf16", "training.num_steps=7",
                        "training.learning_rate=3e-4", "training.micro_batch_size=auto", "training.resume_from="});
  CHECK(c.training.num_steps == 7);
  CHECK(c.model.dtype == "bfloat16");
  CHECK(c.training.learning_rate == 3e-4);
  CHECK(c.training.micro_batch_size == 0);
  CHECK(c.training.resume_from.empty());
  CHECK(c.training.batch_size == 64);  // untouched keys keep the file's values
  CHECK(c.yaml_text.find("num_steps: 7\n") != std::string::npos);
}

TEST_CASE("config: a malformed or unknown override names the override", "[config]") {
  CHECK(error_of(kMinimal, {"training.num_steps"}) == "--set training.num_steps: expected section.key=value");
  CHECK(error_of(kMinimal, {"num_steps=5"}) == "--set num_steps=5: expected section.key=value");
  CHECK(error_of(kMinimal, {".num_steps=5"}) == "--set .num_steps=5: expected section.key=value");
  CHECK(error_of(kMinimal, {"training.foo=1"})
            .rfind("--set training.foo=1: unknown key 'training.foo' (accepted: batch_size, ", 0) == 0);
  CHECK(error_of(kMinimal, {"training.num_steps=many"}) ==
        "--set training.num_steps=many: training.num_steps: 'many' is not an integer >= 1");
  CHECK(error_of(kMinimal, {"training.num_steps=[1"})
            .rfind("--set training.num_steps=[1: the value is not valid YAML", 0) == 0);
}

TEST_CASE("config: model.name and dataset.name are required", "[config]") {
  CHECK(error_of("dataset:\n  name: d\n").rfind("cfg.yaml: model.name is required", 0) == 0);
  CHECK(error_of("model:\n  name: m\n").rfind("cfg.yaml: dataset.name is required", 0) == 0);
  CHECK(error_of("").rfind("cfg.yaml: model.name is required", 0) == 0);
  CHECK(error_of("model:\n  name:\ndataset:\n  name: d\n") ==
        "cfg.yaml: model.name: an empty value is not a non-empty string");
}

TEST_CASE("config: config_to_yaml reloads to the same config", "[config]") {
  for (const std::string& text : {kMinimal, kFull}) {
    mt::Config a = mt::parse_config(text, "cfg.yaml",
                                    {"training.learning_rate=0.1", "training.seed=18446744073709551615",
                                     "model.name='null'", "training.resume_from=''"});
    mt::Config b = mt::parse_config(a.yaml_text, "again.yaml");
    check_same(a, b);
    CHECK(b.model.name == "null");
    CHECK(b.training.seed == 18446744073709551615ull);
    CHECK(b.yaml_text == a.yaml_text);
  }
  mt::Config c = mt::parse_config(kMinimal, "cfg.yaml");
  CHECK(c.yaml_text.find("micro_batch_size: auto\n") != std::string::npos);
  CHECK(c.yaml_text.find("recompute_layers: auto\n") != std::string::npos);
  CHECK(c.yaml_text.find("max_grad_norm: 1.0\n") != std::string::npos);
  CHECK(c.yaml_text.find("learning_rate: 1e-05\n") != std::string::npos);
}

TEST_CASE("config: a YAML syntax error names the file and line", "[config]") {
  std::string msg = error_of(kMinimal + "training:\n  batch_size: [8\n  num_steps: 5\n");
  CHECK(msg.rfind("cfg.yaml:", 0) == 0);
  CHECK(msg.find("invalid YAML") != std::string::npos);
  std::string line = msg.substr(9, msg.find(':', 9) - 9);
  CHECK(std::stoi(line) >= 6);
}

TEST_CASE("config: load_config reads a file and records its path", "[config]") {
  auto dir = std::filesystem::temp_directory_path() / ("mt_config_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto file = dir / "run.yaml";
  std::ofstream(file) << kFull;
  mt::Config c = mt::load_config(file, {"training.num_steps=9"});
  CHECK(c.source == file);
  CHECK(c.training.num_steps == 9);
  CHECK(c.model.dtype == "float32");
  try {
    mt::load_config(dir / "missing.yaml");
    FAIL("no error for a missing file");
  } catch (const mt::Error& e) {
    CHECK(std::string(e.what()) == (dir / "missing.yaml").string() + ": no such configuration file");
  }
  std::ofstream(file) << kMinimal << "optimizer:\n  beta2: 1\n";
  try {
    mt::load_config(file);
    FAIL("no error for beta2 = 1");
  } catch (const mt::Error& e) {
    CHECK(std::string(e.what()) == file.string() + ": optimizer.beta2: '1' is not a number in [0, 1)");
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("config: evaluation, length and warmup keys are checked together", "[config]") {
  CHECK(error_of(kMinimal, {"dataset.val_size=2.5"}) ==
        "cfg.yaml: dataset.val_size: 2.5 is neither a fraction below 1 nor a whole count of examples");
  CHECK(error_of(kMinimal, {"dataset.val_size=0.1", "dataset.eval_dataset=held_out"}) ==
        "cfg.yaml: dataset.val_size and dataset.eval_dataset both name an evaluation set; keep one");
  CHECK(error_of(kMinimal, {"training.warmup_steps=3", "training.warmup_ratio=0.1"}) ==
        "cfg.yaml: training.warmup_steps 3 and training.warmup_ratio 0.1 both set the warmup; keep one");
  CHECK(error_of(kMinimal, {"dataset.streaming=true", "dataset.shuffle=false"}) ==
        "cfg.yaml: dataset.streaming reads plain-text corpora for training.stage pt, not sft");
  CHECK(error_of(kMinimal, {"dataset.streaming=true", "training.stage=pt"}) ==
        "cfg.yaml: dataset.streaming reads blocks in corpus order; set dataset.shuffle: false");
  CHECK(error_of(kMinimal, {"dataset.streaming=true", "training.stage=pt", "dataset.shuffle=false",
                            "training.num_train_epochs=1"}) ==
        "cfg.yaml: dataset.streaming does not know the corpus length before reading it; set training.num_steps, not "
        "training.num_train_epochs");
  CHECK(error_of(kMinimal, {"dataset.preprocessing_batch_size=1000"}) ==
        "cfg.yaml: dataset.preprocessing_batch_size: 1000: only training.stage pt (blocks cut per batch of documents) "
        "and kto (the KL shift's blocks of records) use it");
  CHECK(mt::parse_config(kMinimal, "cfg.yaml", {"dataset.preprocessing_batch_size=500", "training.stage=kto"})
            .dataset.preprocessing_batch_size == 500);
  CHECK(error_of(kMinimal, {"dataset.preprocessing_batch_size=1000", "training.stage=pt", "dataset.streaming=true",
                            "dataset.shuffle=false"}) ==
        "cfg.yaml: dataset.preprocessing_batch_size: 1000: dataset.streaming cuts the corpus whole; set it to 0");
  CHECK(error_of(kMinimal, {"dataset.sample_by=document"}) ==
        "cfg.yaml: dataset.sample_by: document: only training.stage pt reads .txt files as documents");
  CHECK(error_of(kMinimal, {"dataset.sample_by=paragraph", "training.stage=pt", "dataset.streaming=true",
                            "dataset.shuffle=false"}) ==
        "cfg.yaml: dataset.sample_by: paragraph: dataset.streaming reads one document per line");
  CHECK(error_of(kMinimal, {"training.stage=rm"}) ==
        "--set training.stage=rm: training.stage: 'rm' is not one of sft, pt, dpo, kto");
  const mt::Config c = mt::parse_config(kMinimal, "cfg.yaml",
                                        {"training.lr_scheduler=cosine_with_min_lr", "dataset.val_size=16",
                                         "training.num_train_epochs=2.5", "training.stage=pt"});
  CHECK(c.training.lr_scheduler == "cosine");
  CHECK(c.dataset.val_size == 16.0);
  CHECK(c.training.num_train_epochs == 2.5);
  CHECK(c.training.stage == "pt");
  CHECK(c.training.report_to.empty());
  const mt::Config tb = mt::parse_config(kMinimal + "training:\n  report_to: [tensorboard]\n  plot_loss: true\n", "cfg.yaml");
  CHECK(tb.training.report_to == std::vector<std::string>{"tensorboard"});
  CHECK(tb.training.plot_loss);
  CHECK(mt::parse_config(tb.yaml_text, "again.yaml").training.report_to == tb.training.report_to);
  CHECK(error_of(kMinimal, {"training.report_to=[wandb]"}) ==
        "--set training.report_to=[wandb]: training.report_to: 'wandb' is not one of tensorboard");
}

TEST_CASE("config: store.offload and its paths (a list or comma-separated), round trip and checks", "[config]") {
  const mt::Config list = mt::parse_config(with("store", "offload", "optimizer\n  offload_paths: [/a, /b]"), "cfg.yaml");
  CHECK(list.store.offload == "optimizer");
  CHECK(list.store.offload_paths == std::vector<std::string>{"/a", "/b"});
  CHECK(mt::stream_dtype_of(list) == mt::DType::f32);
  const mt::Config comma = mt::parse_config(kMinimal, "cfg.yaml", {"store.offload=optimizer+master",
                                                                   "store.offload_paths=/x,/y"});
  CHECK(comma.store.offload_paths == std::vector<std::string>{"/x", "/y"});
  CHECK(mt::stream_dtype_of(comma) == mt::DType::bf16);  // auto: the bf16 copy streams
  const mt::Config back = mt::parse_config(comma.yaml_text, "back.yaml");
  CHECK(back.store.offload == comma.store.offload);
  CHECK(back.store.offload_paths == comma.store.offload_paths);
  CHECK(mt::parse_config(kMinimal, "cfg.yaml").store.offload_paths.empty());
  CHECK(error_of(with("store", "offload", "optimizer")) ==
        "cfg.yaml: store.offload_paths: store.offload optimizer needs one or more directories");
  CHECK(error_of(with("store", "offload", "disk")).rfind("cfg.yaml: store.offload: 'disk' is not", 0) == 0);
  CHECK(error_of(kMinimal, {"store.offload=optimizer+master", "store.offload_paths=/x", "model.stream_dtype=float32"})
            .rfind("cfg.yaml: model.stream_dtype: store.offload optimizer+master keeps no fp32 master", 0) == 0);
}

TEST_CASE("config: preference training keys, with LLaMA-Factory's names and defaults", "[config]") {
  const mt::Config d = mt::parse_config(kMinimal, "cfg.yaml");
  CHECK(d.training.pref_loss == "sigmoid");
  CHECK(d.training.pref_beta == 0.1);
  CHECK(d.training.pref_ftx == 0.0);
  CHECK(d.training.dpo_label_smoothing == 0.0);
  CHECK(d.training.simpo_gamma == 0.5);
  CHECK(d.training.ref_model.empty());
  const mt::Config c = mt::parse_config(kMinimal, "cfg.yaml",
                                        {"training.stage=dpo", "training.pref_loss=simpo", "training.pref_beta=2.5",
                                         "training.simpo_gamma=1.0", "training.pref_ftx=0.1"});
  CHECK(c.training.stage == "dpo");
  CHECK(c.training.pref_loss == "simpo");
  CHECK(mt::parse_config(c.yaml_text, "again.yaml").training.pref_beta == 2.5);
  CHECK(error_of(kMinimal, {"training.pref_loss=kto_pair"}) ==
        "--set training.pref_loss=kto_pair: training.pref_loss: 'kto_pair' is not one of sigmoid, hinge, ipo, orpo, "
        "simpo");
  CHECK(error_of(kMinimal, {"training.pref_beta=0"}) ==
        "--set training.pref_beta=0: training.pref_beta: '0' is not a number > 0");
  CHECK(d.training.kto_chosen_weight == 1.0);
  CHECK(d.training.kto_rejected_weight == 1.0);
  const mt::Config kto = mt::parse_config(kMinimal, "cfg.yaml",
                                          {"training.stage=kto", "training.kto_chosen_weight=1.33",
                                           "training.kto_rejected_weight=0.5"});
  CHECK(kto.training.stage == "kto");
  CHECK(mt::parse_config(kto.yaml_text, "again.yaml").training.kto_chosen_weight == 1.33);
  CHECK(kto.training.kto_rejected_weight == 0.5);
  CHECK(error_of(kMinimal, {"training.stage=kto", "dataset.packing=true"}) ==
        "cfg.yaml: dataset.packing: training.stage kto keeps each example's sequences apart; set it to false");
  CHECK(error_of(kMinimal, {"training.dpo_label_smoothing=0.5"}) ==
        "--set training.dpo_label_smoothing=0.5: training.dpo_label_smoothing: '0.5' is not a number in [0, 0.5)");
  CHECK(error_of(kMinimal, {"training.pref_loss=ipo", "training.dpo_label_smoothing=0.1"}) ==
        "cfg.yaml: training.dpo_label_smoothing: 0.1: only pref_loss sigmoid smooths its labels (pref_loss is ipo)");
  CHECK(error_of(kMinimal, {"training.pref_loss=orpo", "training.ref_model=/models/ref"}) ==
        "cfg.yaml: training.ref_model: '/models/ref': pref_loss orpo uses no reference model");
  CHECK(error_of(kMinimal, {"training.stage=dpo", "dataset.packing=true"}) ==
        "cfg.yaml: dataset.packing: training.stage dpo keeps each example's sequences apart; set it to false");
}
