// convert_llamafactory_config: the key table, the refusals and the ignored keys with their reasons.
// Invariant: the table below is the only list of LLaMA-Factory keys we map; keys in kIgnored change nothing in
// MegaTrain's training (logging, hub, caching, distributed-launch settings we do not need).
#include "config/llamafactory_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "config/yaml_fields.h"
#include "core/error.h"

namespace mt {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Our section -> (key, value text) in the order first set; a later set replaces the value.
class Sections {
 public:
  void set(const std::string& section, const std::string& key, const std::string& value) {
    auto& keys = sections_[section];
    for (auto& kv : keys)
      if (kv.first == key) {
        kv.second = value;
        return;
      }
    keys.emplace_back(key, value);
  }
  void erase(const std::string& section, const std::string& key) {
    std::erase_if(sections_[section], [&](const auto& kv) { return kv.first == key; });
  }
  bool has(const std::string& section, const std::string& key) const {
    const auto it = sections_.find(section);
    return it != sections_.end() &&
           std::any_of(it->second.begin(), it->second.end(), [&](const auto& kv) { return kv.first == key; });
  }
  std::string yaml() const {
    YAML::Emitter emit;
    emit << YAML::BeginMap;
    for (const char* section : {"model", "dataset", "training", "optimizer"}) {
      const auto it = sections_.find(section);
      if (it == sections_.end() || it->second.empty()) continue;
      emit << YAML::Key << section << YAML::Value << YAML::BeginMap;
      for (const auto& [key, value] : it->second) emit << YAML::Key << key << YAML::Value << value;
      emit << YAML::EndMap;
    }
    emit << YAML::EndMap;
    return std::string(emit.c_str()) + "\n";
  }

 private:
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> sections_;
};

struct Target {
  const char* section;
  const char* key;
  std::function<std::string(const YAML::Node&, const YamlPlace&)> value;  // checked, as our YAML scalar
};

std::function<std::string(const YAML::Node&, const YamlPlace&)> as_text(bool allow_empty = false) {
  return [=](const YAML::Node& n, const YamlPlace& p) { return read_text(n, p, allow_empty); };
}
std::function<std::string(const YAML::Node&, const YamlPlace&)> as_integer(int64_t min) {
  return [=](const YAML::Node& n, const YamlPlace& p) { return std::to_string(read_integer(n, p, min)); };
}
std::function<std::string(const YAML::Node&, const YamlPlace&)> as_real(RealBounds bounds) {
  return [=](const YAML::Node& n, const YamlPlace& p) { return real_to_text(read_real(n, p, bounds)); };
}
std::function<std::string(const YAML::Node&, const YamlPlace&)> as_flag() {
  return [](const YAML::Node& n, const YamlPlace& p) { return std::string(read_flag(n, p) ? "true" : "false"); };
}
std::function<std::string(const YAML::Node&, const YamlPlace&)> as_choice(std::vector<std::string_view> choices) {
  return [=](const YAML::Node& n, const YamlPlace& p) { return read_choice(n, p, choices); };
}

// LLaMA-Factory key -> our key, one to one.
const std::map<std::string, Target>& direct_keys() {
  static const std::map<std::string, Target> table = {
      {"model_name_or_path", {"model", "name", as_text()}},
      {"trust_remote_code", {"model", "trust_remote_code", as_flag()}},
      {"dataset", {"dataset", "name", as_text()}},
      {"dataset_dir", {"dataset", "dataset_dir", as_text()}},
      {"template", {"dataset", "template", as_text()}},
      {"cutoff_len", {"dataset", "max_seq_len", as_integer(2)}},
      {"max_samples", {"dataset", "max_samples", as_integer(1)}},
      {"streaming", {"dataset", "streaming", as_flag()}},
      {"packing", {"dataset", "packing", as_flag()}},
      {"train_on_prompt", {"dataset", "train_on_prompt", as_flag()}},
      {"val_size", {"dataset", "val_size", as_real({0.0, kInf})}},
      {"eval_dataset", {"dataset", "eval_dataset", as_text()}},
      {"dataloader_num_workers", {"dataset", "num_workers", as_integer(0)}},
      {"stage", {"training", "stage", as_choice({"sft", "pt", "dpo", "kto"})}},
      {"pref_loss", {"training", "pref_loss", as_choice({"sigmoid", "hinge", "ipo", "orpo", "simpo"})}},
      {"pref_beta", {"training", "pref_beta", as_real({0.0, kInf, true})}},
      {"pref_ftx", {"training", "pref_ftx", as_real({0.0, kInf})}},
      {"dpo_label_smoothing", {"training", "dpo_label_smoothing", as_real({0.0, 0.5, false, true})}},
      {"simpo_gamma", {"training", "simpo_gamma", as_real({0.0, kInf})}},
      {"kto_chosen_weight", {"training", "kto_chosen_weight", as_real({0.0, kInf})}},
      {"kto_rejected_weight", {"training", "kto_rejected_weight", as_real({0.0, kInf})}},
      {"ref_model", {"training", "ref_model", as_text()}},
      {"learning_rate", {"training", "learning_rate", as_real({0.0, kInf})}},
      {"num_train_epochs", {"training", "num_train_epochs", as_real({0.0, kInf, true})}},
      {"warmup_ratio", {"training", "warmup_ratio", as_real({0.0, 1.0})}},
      {"warmup_steps", {"training", "warmup_steps", as_integer(0)}},
      {"weight_decay", {"training", "weight_decay", as_real({0.0, kInf})}},
      {"max_grad_norm", {"training", "max_grad_norm", as_real({-kInf, kInf})}},
      {"output_dir", {"training", "output_dir", as_text()}},
      {"logging_steps", {"training", "logging_steps", as_integer(1)}},
      {"save_steps", {"training", "save_steps", as_integer(0)}},
      {"save_total_limit", {"training", "save_total_limit", as_integer(0)}},
      {"eval_steps", {"training", "eval_steps", as_integer(1)}},
      {"plot_loss", {"training", "plot_loss", as_flag()}},
      {"overwrite_output_dir", {"training", "overwrite_output_dir", as_flag()}},
      {"seed", {"training", "seed", [](const YAML::Node& n, const YamlPlace& p) {
                  return std::to_string(read_unsigned(n, p));
                }}},
      {"adam_beta1", {"optimizer", "beta1", as_real({0.0, 1.0, false, true})}},
      {"adam_beta2", {"optimizer", "beta2", as_real({0.0, 1.0, false, true})}},
      {"adam_epsilon", {"optimizer", "eps", as_real({0.0, kInf, true})}},
  };
  return table;
}

// Keys that change nothing in our training, with why.
const std::map<std::string, std::string>& ignored_keys() {
  static const std::map<std::string, std::string> table = {
      {"do_train", "train always trains"},
      {"do_eval", "evaluation runs where val_size or eval_dataset gives a set"},
      {"do_predict", "no prediction mode"},
      {"overwrite_cache", "no dataset cache: data is tokenized at each start"},
      {"preprocessing_num_workers", "tokenization threads are chosen by the loader"},
      {"per_device_eval_batch_size", "evaluation uses the training batch's share"},
      {"eval_strategy", "eval_steps decides"},
      {"evaluation_strategy", "eval_steps decides"},
      {"save_strategy", "save_steps decides"},
      {"logging_strategy", "logging_steps decides"},
      {"save_only_model", "checkpoints always hold the optimizer state, for exact resume"},
      {"ddp_timeout", "no torch.distributed process group"},
      {"flash_attn", "attention runs MegaTrain's own kernels"},
      {"gradient_checkpointing", "activation recompute is planned from GPU memory (training.recompute_layers)"},
      {"enable_liger_kernel", "MegaTrain's own kernels"},
      {"use_unsloth", "MegaTrain's own kernels"},
      {"neat_packing", "packing keeps examples apart (MegaTrain's packing is already contamination-free)"},
      {"tokenized_path", "no dataset cache"},
      {"run_name", "no tracker integration"},
      {"push_to_hub", "nothing is uploaded"},
      {"hub_model_id", "nothing is uploaded"},
      {"lora_rank", "finetuning_type full trains every parameter"},
      {"lora_alpha", "finetuning_type full trains every parameter"},
      {"lora_dropout", "finetuning_type full trains every parameter"},
      {"lora_target", "finetuning_type full trains every parameter"},
      {"freeze_vision_tower", "only the text model trains; other towers are carried unchanged"},
      {"freeze_multi_modal_projector", "only the text model trains; other towers are carried unchanged"},
      {"image_max_pixels", "images are not trained"},
      {"video_max_pixels", "videos are not trained"},
  };
  return table;
}

// A DeepSpeed JSON changes the training only through its own optimizer, scheduler or fp16; ZeRO partitioning and
// offload do what the host store already does.
std::string deepspeed_reason(const YAML::Node& node, const std::string& origin) {
  const std::string file = read_text(node, {origin, "deepspeed"}, false);
  std::ifstream in(file);
  if (!in.good()) return fmt::format("ZeRO sharding and offload: the host store holds the states ({} not found here)",
                                     file);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error&) {
    throw Error(fmt::format("{}: deepspeed: '{}' is not valid JSON", origin, file));
  }
  for (const char* section : {"optimizer", "scheduler"})
    MT_REQUIRE(!j.contains(section), "{}: deepspeed: '{}' sets its own {}, which MegaTrain does not reproduce; remove "
               "it (our AdamW and the lr_scheduler_type of this file are used)", origin, file, section);
  const bool fp16 = j.contains("fp16") && j["fp16"].is_object() && j["fp16"].contains("enabled") &&
                    j["fp16"]["enabled"] == true;  // "auto" follows fp16 of this file
  MT_REQUIRE(!fp16, "{}: deepspeed: '{}' enables fp16, which MegaTrain does not train in (bf16 or fp32)", origin, file);
  return "ZeRO sharding and offload: the host store holds the states";
}

// What LLaMA-Factory trains with when `template` is unset: the tokenizer's own chat template (parse_template, our
// `jinja`) where the model directory has one, else `empty`. "" for a model that is not a local directory (a hub id):
// ours then picks `auto`.
std::string unset_template(const YAML::Node& root) {
  const YAML::Node model = root["model_name_or_path"];
  if (!model.IsScalar()) return "";
  const std::filesystem::path dir = model.Scalar();
  if (!std::filesystem::is_directory(dir)) return "";
  if (std::filesystem::is_regular_file(dir / "chat_template.jinja")) return "jinja";
  std::ifstream in(dir / "tokenizer_config.json");
  if (!in.good()) return "empty";
  const nlohmann::json config = nlohmann::json::parse(in, nullptr, false);
  return config.is_object() && config.contains("chat_template") && !config["chat_template"].is_null() ? "jinja"
                                                                                                       : "empty";
}

}  // namespace

bool is_llamafactory_config(const YAML::Node& root) { return root.IsMap() && root["model_name_or_path"]; }

ConvertedConfig convert_llamafactory_config(const YAML::Node& root, const std::string& origin) {
  MT_ASSERT(is_llamafactory_config(root));
  Sections sections;
  // transformers' and LLaMA-Factory's defaults where ours differ, so that an unset key means what it means there.
  sections.set("model", "dtype", "float32");
  sections.set("dataset", "max_seq_len", "2048");
  sections.set("training", "learning_rate", "5e-05");
  sections.set("training", "lr_scheduler", "linear");
  sections.set("training", "num_train_epochs", "3.0");
  sections.set("training", "logging_steps", "500");
  sections.set("training", "save_steps", "500");
  ConvertedConfig out;
  std::optional<int64_t> per_device, accumulation, preprocessing_batch;
  std::string precision = "float32";
  for (const auto& entry : root) {
    MT_REQUIRE(entry.first.IsScalar(), "{}: a key must be a string, not {}", origin, describe_node(entry.first));
    const std::string key = entry.first.Scalar();
    const YAML::Node& value = entry.second;
    const YamlPlace place{origin, key};
    if (const auto it = direct_keys().find(key); it != direct_keys().end()) {
      const Target& t = it->second;
      sections.set(t.section, t.key, t.value(value, place));
    } else if (const auto ig = ignored_keys().find(key); ig != ignored_keys().end()) {
      out.ignored.push_back(fmt::format("{} ({})", key, ig->second));
    } else if (key == "report_to") {  // none, all, one name or a list; we write TensorBoard files only
      std::vector<std::string> names;
      if (value.IsSequence())
        for (size_t i = 0; i < value.size(); ++i) names.push_back(read_text(value[i], place, false));
      else
        names.push_back(read_text(value, place, false));
      std::string kept = "none";
      for (const std::string& name : names) {
        if (name == "tensorboard" || name == "all") kept = "tensorboard";
        else if (name != "none") out.ignored.push_back(fmt::format("report_to {} (no such tracker here; "
                                                                   "metrics.jsonl has every value)", name));
      }
      sections.set("training", "report_to", kept);
    } else if (key == "finetuning_type") {
      const std::string type = read_text(value, place, false);
      MT_REQUIRE(type == "full", "{}: finetuning_type: '{}': MegaTrain trains every parameter (full); LoRA, freeze "
                 "and OFT are not supported", origin, type);
    } else if (key == "preprocessing_batch_size") {
      preprocessing_batch = read_integer(value, place, 1);
    } else if (key == "per_device_train_batch_size") {
      per_device = read_integer(value, place, 1);
    } else if (key == "gradient_accumulation_steps") {
      accumulation = read_integer(value, place, 1);
    } else if (key == "resume_from_checkpoint") {  // true: the newest in output_dir; a path; null or false: none
      bool flag = false;
      if (value.IsScalar() && YAML::convert<bool>::decode(value, flag)) {
        if (flag) sections.set("training", "resume_from", "auto");
      } else if (!value.IsNull()) {
        sections.set("training", "resume_from", read_text(value, place, false));
      }
    } else if (key == "max_steps") {
      const int64_t steps = read_integer(value, place, -1);
      if (steps > 0) sections.set("training", "num_steps", std::to_string(steps));
    } else if (key == "lr_scheduler_type") {
      sections.set(
          "training", "lr_scheduler", read_choice(value, place, {"constant", "constant_with_warmup", "linear", "cosine",
                                                     "cosine_with_min_lr"}));
    } else if (key == "lr_scheduler_kwargs") {
      MT_REQUIRE(value.IsMap() && value.size() == 1 && value["min_lr_rate"],
                 "{}: lr_scheduler_kwargs: only {{min_lr_rate: ...}} (cosine_with_min_lr) is understood", origin);
      sections.set(
          "training", "min_lr_ratio", real_to_text(read_real(value["min_lr_rate"], {origin, "lr_scheduler_kwargs.min_lr_rate"},
                                                 {0.0, 1.0})));
    } else if (key == "bf16" || key == "pure_bf16") {
      if (read_flag(value, place)) precision = "bfloat16";
      if (key == "pure_bf16") out.ignored.push_back("pure_bf16 (the fp32 master and AdamW state stay fp32; compute is bf16)");
    } else if (key == "fp16") {
      MT_REQUIRE(!read_flag(value, place), "{}: fp16: true: MegaTrain computes in bf16 or fp32, not fp16 with loss "
                 "scaling; set bf16: true", origin);
    } else if (key == "deepspeed") {
      out.ignored.push_back("deepspeed (" + deepspeed_reason(value, origin) + ")");
    } else if (key.starts_with("lora_") || key.starts_with("pissa_") || key.starts_with("freeze_")) {
      out.ignored.push_back(fmt::format("{} (finetuning_type full trains every parameter)", key));
    } else {
      throw Error(fmt::format("{}: {}: a LLaMA-Factory key MegaTrain does not know; remove it or use our own "
                              "configuration (megatrain convert-config prints it)", origin, key));
    }
  }
  // Stage pt cuts each batch of preprocessing_batch_size documents (1000 by default) on its own; reproduced exactly,
  // except streamed (our stream cuts the corpus whole). Stage kto's KL shift runs in blocks of as many records (1000
  // where unset: ours too). Other stages' examples do not depend on it.
  const auto stage_is = [&](const char* s) { return root["stage"] && root["stage"].IsScalar() && root["stage"].Scalar() == s; };
  const bool pt = stage_is("pt"), kto = stage_is("kto");
  const bool streaming = root["streaming"] && read_flag(root["streaming"], {origin, "streaming"});
  if (pt && !streaming)
    sections.set("dataset", "preprocessing_batch_size", std::to_string(preprocessing_batch.value_or(1000)));
  else if (kto && preprocessing_batch)
    sections.set("dataset", "preprocessing_batch_size", std::to_string(*preprocessing_batch));
  else if (preprocessing_batch)
    out.ignored.push_back(pt ? "preprocessing_batch_size (dataset.streaming cuts the corpus whole)"
                             : "preprocessing_batch_size (only stage pt's blocks and kto's KL shift depend on it)");
  if (!sections.has("dataset", "template"))
    if (const std::string t = unset_template(root); !t.empty()) sections.set("dataset", "template", t);
  sections.set("model", "dtype", precision);
  if (per_device || accumulation)  // one GPU: the global batch is what one optimizer step sees
    sections.set("training", "batch_size", std::to_string(per_device.value_or(8) * accumulation.value_or(1)));
  else
    sections.set("training", "batch_size", "8");
  if (sections.has("training", "num_steps")) sections.erase("training", "num_train_epochs");  // max_steps wins
  out.yaml_text = sections.yaml();
  return out;
}

}  // namespace mt
