// Loads the run configuration: YAML file, then `section.key=value` overrides, then validation; and back to YAML.
// Invariant: the schema table below is the only list of sections and keys; parsing, accepted_config_keys and
// config_to_yaml all walk it, in its order.
#include "config/config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "config/llamafactory_config.h"
#include "config/yaml_depth.h"
#include "config/yaml_fields.h"
#include "core/error.h"
#include "core/log.h"

namespace mt {
namespace {

// One key of the schema: how to read its YAML value into a Config and how to write it back as a scalar.
struct Field {
  std::string_view section;
  std::string_view key;
  std::function<void(Config&, const YAML::Node&, const YamlPlace&)> read;
  std::function<std::string(const Config&)> show;
};

constexpr double kInf = std::numeric_limits<double>::infinity();

// Field builders; `at` is a generic lambda giving the member of a (const) Config.
template <typename At>
Field text(std::string_view section, std::string_view key, bool allow_empty, At at) {
  return {section, key,
          [=](Config& c, const YAML::Node& n, const YamlPlace& p) { at(c) = read_text(n, p, allow_empty); },
          [=](const Config& c) { return at(c); }};
}

template <typename At>
Field choice(std::string_view section, std::string_view key, std::vector<std::string_view> choices, At at,
             std::vector<std::pair<std::string_view, std::string_view>> aliases = {}) {
  return {section, key,
          [=](Config& c, const YAML::Node& n, const YamlPlace& p) { at(c) = read_choice(n, p, choices, aliases); },
          [=](const Config& c) { return at(c); }};
}

template <typename At>
Field flag(std::string_view section, std::string_view key, At at) {
  return {section, key, [=](Config& c, const YAML::Node& n, const YamlPlace& p) { at(c) = read_flag(n, p); },
          [=](const Config& c) { return std::string(at(c) ? "true" : "false"); }};
}

template <typename At>
Field integer(std::string_view section, std::string_view key, int64_t min, At at) {
  return {section, key, [=](Config& c, const YAML::Node& n, const YamlPlace& p) { at(c) = read_integer(n, p, min); },
          [=](const Config& c) { return std::to_string(at(c)); }};
}

template <typename At>
Field integer_or_auto(std::string_view section, std::string_view key, int64_t min, At at) {
  const int64_t auto_value = min - 1;  // 0 where min is 1, -1 where 0 is a valid value
  return {section, key,
          [=](Config& c, const YAML::Node& n, const YamlPlace& p) {
            at(c) = read_integer_or_auto(n, p, min, auto_value);
          },
          [=](const Config& c) { return at(c) == auto_value ? std::string("auto") : std::to_string(at(c)); }};
}

template <typename At>
Field unsigned_integer(std::string_view section, std::string_view key, At at) {
  return {section, key, [=](Config& c, const YAML::Node& n, const YamlPlace& p) { at(c) = read_unsigned(n, p); },
          [=](const Config& c) { return std::to_string(at(c)); }};
}

template <typename At>
Field real(std::string_view section, std::string_view key, RealBounds bounds, At at) {
  return {section, key, [=](Config& c, const YAML::Node& n, const YamlPlace& p) { at(c) = read_real(n, p, bounds); },
          [=](const Config& c) { return real_to_text(at(c)); }};
}

// A list of trackers: `none`, one name, or a sequence of names (LLaMA-Factory writes `report_to: [tensorboard]`).
template <typename At>
Field trackers(std::string_view section, std::string_view key, std::vector<std::string_view> names, At at) {
  return {section, key,
          [=](Config& c, const YAML::Node& n, const YamlPlace& p) {
            std::vector<std::string>& list = at(c);
            list.clear();
            if (n.IsSequence()) {
              for (size_t i = 0; i < n.size(); ++i) list.push_back(read_choice(n[i], p, names));
            } else {
              std::vector<std::string_view> with_none = names;
              with_none.insert(with_none.begin(), "none");
              const std::string one = read_choice(n, p, with_none);
              if (one != "none") list.push_back(one);
            }
          },
          [=](const Config& c) { return at(c).empty() ? std::string("none") : fmt::format("{}", fmt::join(at(c), ",")); }};
}

// A list of directories: a YAML sequence of strings, or one string of comma-separated entries; shown comma-separated.
template <typename At>
Field path_list(std::string_view section, std::string_view key, At at) {
  return {section, key,
          [=](Config& c, const YAML::Node& n, const YamlPlace& p) {
            std::vector<std::string> out;
            auto add = [&](const std::string& text) {
              for (size_t b = 0; b <= text.size();) {
                const size_t e = std::min(text.find(',', b), text.size());
                if (e > b) out.push_back(text.substr(b, e - b));
                b = e + 1;
              }
            };
            if (n.IsSequence()) {
              for (const YAML::Node& item : n) add(read_text(item, p, false));
            } else if (!n.IsNull()) {
              add(read_text(n, p, true));
            }
            at(c) = out;
          },
          [=](const Config& c) { return fmt::format("{}", fmt::join(at(c), ",")); }};
}

// A non-negative real, or `auto` (held as -1).
template <typename At>
Field real_or_auto(std::string_view section, std::string_view key, At at) {
  return {section, key,
          [=](Config& c, const YAML::Node& n, const YamlPlace& p) {
            at(c) = n.IsScalar() && n.Scalar() == "auto" ? -1.0 : read_real(n, p, {0.0, kInf});
          },
          [=](const Config& c) { return at(c) < 0 ? std::string("auto") : real_to_text(at(c)); }};
}

// One of a switch's spellings (core/runtime_switches.h), read into its enum.
template <typename E, size_t N, typename At>
Field named(std::string_view section, std::string_view key, const SwitchName<E> (&names)[N], At at) {
  std::vector<std::string_view> choices;
  for (const SwitchName<E>& n : names) choices.push_back(n.name);
  return {section, key,
          [=](Config& c, const YAML::Node& n, const YamlPlace& p) {
            const std::string text = read_choice(n, p, choices);
            for (const SwitchName<E>& name : names)
              if (name.name == text) at(c) = name.value;
          },
          [=](const Config& c) {
            for (const SwitchName<E>& name : names)
              if (name.value == at(c)) return std::string(name.name);
            return std::string();
          }};
}

#define MT_AT(member) [](auto& c) -> auto& { return c.member; }

// The schema: every section and key, in order, with its type and bounds (defaults live in config.h).
const std::vector<Field>& schema() {
  static const std::vector<Field> fields = {
      text("model", "name", false, MT_AT(model.name)),
      choice("model", "dtype", {"bfloat16", "float32"}, MT_AT(model.dtype),
             {{"bf16", "bfloat16"}, {"fp32", "float32"}}),
      choice("model", "stream_dtype", {"auto", "bfloat16", "float32"}, MT_AT(model.stream_dtype),
             {{"bf16", "bfloat16"}, {"fp32", "float32"}}),
      choice("model", "attn_implementation", {"flash_attention_2", "sdpa", "eager"}, MT_AT(model.attn_implementation)),
      flag("model", "trust_remote_code", MT_AT(model.trust_remote_code)),
      choice("model", "init", {"pretrained", "random"}, MT_AT(model.init)),

      text("dataset", "name", false, MT_AT(dataset.name)),
      text("dataset", "dataset_dir", false, MT_AT(dataset.dataset_dir)),
      integer("dataset", "max_seq_len", 2, MT_AT(dataset.max_seq_len)),
      flag("dataset", "shuffle", MT_AT(dataset.shuffle)),
      flag("dataset", "packing", MT_AT(dataset.packing)),
      integer("dataset", "num_workers", 0, MT_AT(dataset.num_workers)),
      text("dataset", "template", false, MT_AT(dataset.template_name)),
      flag("dataset", "train_on_prompt", MT_AT(dataset.train_on_prompt)),
      text("dataset", "eval_dataset", true, MT_AT(dataset.eval_dataset)),
      real("dataset", "val_size", {0.0, kInf}, MT_AT(dataset.val_size)),
      integer("dataset", "max_samples", 0, MT_AT(dataset.max_samples)),
      flag("dataset", "streaming", MT_AT(dataset.streaming)),
      integer("dataset", "preprocessing_batch_size", 0, MT_AT(dataset.preprocessing_batch_size)),
      choice("dataset", "sample_by", {"line", "paragraph", "document"}, MT_AT(dataset.sample_by)),

      integer("training", "batch_size", 1, MT_AT(training.batch_size)),
      integer_or_auto("training", "micro_batch_size", 1, MT_AT(training.micro_batch_size)),
      integer_or_auto("training", "gradient_accumulation_steps", 1, MT_AT(training.gradient_accumulation_steps)),
      integer_or_auto("training", "gpus_per_node", 1, MT_AT(training.gpus_per_node)),
      choice("training", "stage", {"sft", "pt", "dpo", "kto"}, MT_AT(training.stage)),
      integer("training", "num_steps", 1, MT_AT(training.num_steps)),
      real("training", "num_train_epochs", {0.0, kInf}, MT_AT(training.num_train_epochs)),
      real("training", "learning_rate", {0.0, kInf}, MT_AT(training.learning_rate)),
      // transformers' names where they mean the same: our constant warms up; cosine_with_min_lr is cosine with
      // min_lr_ratio.
      choice("training", "lr_scheduler", {"constant", "cosine", "linear"}, MT_AT(training.lr_scheduler),
             {{"constant_with_warmup", "constant"}, {"cosine_with_min_lr", "cosine"}}),
      integer("training", "warmup_steps", 0, MT_AT(training.warmup_steps)),
      real("training", "warmup_ratio", {0.0, 1.0}, MT_AT(training.warmup_ratio)),
      real("training", "min_lr_ratio", {0.0, 1.0}, MT_AT(training.min_lr_ratio)),
      real("training", "weight_decay", {0.0, kInf}, MT_AT(training.weight_decay)),
      real("training", "max_grad_norm", {-kInf, kInf}, MT_AT(training.max_grad_norm)),
      integer("training", "checkpoint_interval", 1, MT_AT(training.checkpoint_interval)),
      integer_or_auto("training", "recompute_layers", 0, MT_AT(training.recompute_layers)),
      integer_or_auto("training", "moe_keep_layers", 0, MT_AT(training.moe_keep_layers)),
      choice("training", "activation_checkpoints", {"auto", "gpu", "host"}, MT_AT(training.activation_checkpoints)),
      choice("training", "optimizer_on_gpu", {"auto", "off"}, MT_AT(training.optimizer_on_gpu)),
      unsigned_integer("training", "seed", MT_AT(training.seed)),
      text("training", "output_dir", false, MT_AT(training.output_dir)),
      integer("training", "logging_steps", 1, MT_AT(training.logging_steps)),
      integer("training", "save_steps", 0, MT_AT(training.save_steps)),
      integer("training", "save_total_limit", 0, MT_AT(training.save_total_limit)),
      flag("training", "save_hf_checkpoints", MT_AT(training.save_hf_checkpoints)),
      integer("training", "eval_steps", 0, MT_AT(training.eval_steps)),
      trackers("training", "report_to", {"tensorboard"}, MT_AT(training.report_to)),
      flag("training", "plot_loss", MT_AT(training.plot_loss)),
      text("training", "resume_from", true, MT_AT(training.resume_from)),
      flag("training", "overwrite_output_dir", MT_AT(training.overwrite_output_dir)),
      integer("training", "max_consecutive_skipped_steps", 0, MT_AT(training.max_consecutive_skipped_steps)),
      real_or_auto("training", "moe_aux_loss_coef", MT_AT(training.moe_aux_loss_coef)),
      choice("training", "pref_loss", {"sigmoid", "hinge", "ipo", "orpo", "simpo"}, MT_AT(training.pref_loss)),
      real("training", "pref_beta", {0.0, kInf, true}, MT_AT(training.pref_beta)),
      real("training", "pref_ftx", {0.0, kInf}, MT_AT(training.pref_ftx)),
      real("training", "dpo_label_smoothing", {0.0, 0.5, false, true}, MT_AT(training.dpo_label_smoothing)),
      real("training", "simpo_gamma", {0.0, kInf}, MT_AT(training.simpo_gamma)),
      real("training", "kto_chosen_weight", {0.0, kInf}, MT_AT(training.kto_chosen_weight)),
      real("training", "kto_rejected_weight", {0.0, kInf}, MT_AT(training.kto_rejected_weight)),
      text("training", "ref_model", true, MT_AT(training.ref_model)),

      choice("optimizer", "type", {"deepspeed_adam", "adamw"}, MT_AT(optimizer.type)),
      real("optimizer", "beta1", {0.0, 1.0, false, true}, MT_AT(optimizer.beta1)),
      real("optimizer", "beta2", {0.0, 1.0, false, true}, MT_AT(optimizer.beta2)),
      real("optimizer", "eps", {0.0, kInf, true}, MT_AT(optimizer.eps)),

      choice("store", "offload", {"none", "optimizer", "optimizer+master"}, MT_AT(store.offload)),
      path_list("store", "offload_paths", MT_AT(store.offload_paths)),

      named("runtime", "attention", kAttentionNames, MT_AT(runtime.attention)),
      flag("runtime", "cudnn_seq_buckets", MT_AT(runtime.cudnn_seq_buckets)),
      flag("runtime", "cudnn_ragged", MT_AT(runtime.cudnn_ragged)),
      flag("runtime", "attention_deterministic", MT_AT(runtime.attention_deterministic)),
      integer("runtime", "cudnn_backward_tile", 0, MT_AT(runtime.cudnn_backward_tile)),
      integer_or_auto("runtime", "cudnn_workspace_mib", 0, MT_AT(runtime.cudnn_workspace_mib)),
      named("runtime", "moe_gemm", kMoeGemmNames, MT_AT(runtime.moe_gemm)),
      integer("runtime", "moe_gemm_streams", 1, MT_AT(runtime.moe_gemm_streams)),
      named("runtime", "delta_rule", kDeltaRuleNames, MT_AT(runtime.delta_rule)),
      flag("runtime", "profile_ops", MT_AT(runtime.profile_ops)),
      named("runtime", "tier_io", kTierIoNames, MT_AT(runtime.tier_io)),
      named("runtime", "step_rates", kStepRatesNames, MT_AT(runtime.step_rates)),
  };
  return fields;
}

#undef MT_AT

// Section names in schema order.
std::vector<std::string_view> sections() {
  std::vector<std::string_view> names;
  for (const Field& f : schema())
    if (names.empty() || names.back() != f.section) names.push_back(f.section);
  return names;
}

// Throws unless `section` is in the schema; the message lists the sections `origin` could have named.
void require_section(std::string_view section, const std::string& origin) {
  std::vector<std::string_view> names = sections();
  MT_REQUIRE(std::find(names.begin(), names.end(), section) != names.end(), "{}: unknown section '{}' (accepted: {})",
             origin, section, fmt::join(names, ", "));
}

// The field `section.key`; an unknown section or key throws, listing what `origin` could have said.
const Field& find_field(std::string_view section, std::string_view key, const std::string& origin) {
  require_section(section, origin);
  std::vector<std::string_view> keys;
  for (const Field& f : schema()) {
    if (f.section != section) continue;
    if (f.key == key) return f;
    keys.push_back(f.key);
  }
  throw Error(fmt::format("{}: unknown key '{}.{}' (accepted: {})", origin, section, key, fmt::join(keys, ", ")));
}

// Reads one YAML document of `origin` into `config`, key by key.
void apply_document(Config& config, const YAML::Node& root, const std::string& origin) {
  if (root.IsNull()) return;
  MT_REQUIRE(root.IsMap(), "{}: the top level must be a map of sections ({}), not {}", origin,
             fmt::join(sections(), ", "), describe_node(root));
  std::set<std::string> seen_sections;
  for (const auto& section : root) {
    MT_REQUIRE(section.first.IsScalar(), "{}: a section name must be a string, not {}", origin,
               describe_node(section.first));
    const std::string& name = section.first.Scalar();
    require_section(name, origin);
    MT_REQUIRE(seen_sections.insert(name).second, "{}: duplicate section '{}'", origin, name);
    if (section.second.IsNull()) continue;
    MT_REQUIRE(section.second.IsMap(), "{}: section '{}' must be a map of keys, not {}", origin, name,
               describe_node(section.second));
    std::set<std::string> seen_keys;
    for (const auto& entry : section.second) {
      MT_REQUIRE(entry.first.IsScalar(), "{}: a key of section '{}' must be a string, not {}", origin, name,
                 describe_node(entry.first));
      const std::string& key = entry.first.Scalar();
      std::string path = name + "." + key;
      const Field& field = find_field(name, key, origin);
      MT_REQUIRE(seen_keys.insert(key).second, "{}: duplicate key '{}'", origin, path);
      field.read(config, entry.second, {origin, path});
    }
  }
}

// Applies one `section.key=value` override; messages name the override.
void apply_override(Config& config, const std::string& assignment) {
  std::string origin = "--set " + assignment;
  size_t eq = assignment.find('=');
  size_t dot = assignment.find('.');
  MT_REQUIRE(eq != std::string::npos && dot != std::string::npos && dot > 0 && dot + 1 < eq,
             "{}: expected section.key=value", origin);
  std::string section = assignment.substr(0, dot);
  std::string key = assignment.substr(dot + 1, eq - dot - 1);
  const Field& field = find_field(section, key, origin);
  YAML::Node value;
  try {
    value = load_yaml_bounded(assignment.substr(eq + 1), origin);
  } catch (const YAML::ParserException& e) {
    throw Error(fmt::format("{}: the value is not valid YAML: {}", origin, e.msg));
  }
  field.read(config, value, {origin, section + "." + key});
}

// Checks that involve more than one key, or a key that has no usable default.
void validate(const Config& config, const std::string& origin) {
  MT_REQUIRE(!config.model.name.empty(), "{}: model.name is required (a Hugging Face model directory or hub id)",
             origin);
  MT_REQUIRE(!config.dataset.name.empty(), "{}: dataset.name is required (entries of dataset_info.json)", origin);
  MT_REQUIRE(!(config.model.dtype == "float32" && config.model.stream_dtype == "bfloat16"),
             "{}: model.stream_dtype: bfloat16 weights cannot feed model.dtype float32 (use auto or float32)", origin);
  MT_REQUIRE(config.store.offload == "none" || !config.store.offload_paths.empty(),
             "{}: store.offload_paths: store.offload {} needs one or more directories", origin, config.store.offload);
  MT_REQUIRE(config.store.offload != "optimizer+master" || config.model.stream_dtype != "float32",
             "{}: model.stream_dtype: store.offload optimizer+master keeps no fp32 master in RAM, so the weights stream "
             "as the bf16 copy (use auto or bfloat16)", origin);
  MT_REQUIRE(config.store.offload != "optimizer+master" || config.model.dtype != "float32",
             "{}: model.dtype: store.offload optimizer+master streams bf16 weights, which cannot feed model.dtype "
             "float32 (use store.offload optimizer)", origin);
  MT_REQUIRE(valid_cudnn_backward_tile(config.runtime.cudnn_backward_tile),
             "{}: runtime.cudnn_backward_tile: {} is not 0 or a power of two of at least 128", origin,
             config.runtime.cudnn_backward_tile);
  MT_REQUIRE(config.runtime.moe_gemm_streams <= kMaxMoeGemmStreams,
             "{}: runtime.moe_gemm_streams: {} is not 1 to {}", origin, config.runtime.moe_gemm_streams,
             kMaxMoeGemmStreams);
  const TrainingConfig& t = config.training;
  const DatasetConfig& d = config.dataset;
  MT_REQUIRE(d.val_size == 0.0 || d.val_size < 1.0 || d.val_size == static_cast<double>(static_cast<int64_t>(d.val_size)),
             "{}: dataset.val_size: {} is neither a fraction below 1 nor a whole count of examples", origin,
             real_to_text(d.val_size));
  MT_REQUIRE(d.val_size == 0.0 || d.eval_dataset.empty(),
             "{}: dataset.val_size and dataset.eval_dataset both name an evaluation set; keep one", origin);
  MT_REQUIRE(d.preprocessing_batch_size == 0 || t.stage == "pt" || t.stage == "kto",
             "{}: dataset.preprocessing_batch_size: {}: only training.stage pt (blocks cut per batch of documents) and "
             "kto (the KL shift's blocks of records) use it", origin, d.preprocessing_batch_size);
  MT_REQUIRE(d.preprocessing_batch_size == 0 || !d.streaming,
             "{}: dataset.preprocessing_batch_size: {}: dataset.streaming cuts the corpus whole; set it to 0", origin,
             d.preprocessing_batch_size);
  MT_REQUIRE(d.sample_by == "line" || t.stage == "pt",
             "{}: dataset.sample_by: {}: only training.stage pt reads .txt files as documents", origin, d.sample_by);
  MT_REQUIRE(d.sample_by == "line" || !d.streaming,
             "{}: dataset.sample_by: {}: dataset.streaming reads one document per line", origin, d.sample_by);
  MT_REQUIRE(!d.streaming || t.stage == "pt",
             "{}: dataset.streaming reads plain-text corpora for training.stage pt, not {}", origin, t.stage);
  MT_REQUIRE(!d.streaming || !d.shuffle,
             "{}: dataset.streaming reads blocks in corpus order; set dataset.shuffle: false", origin);
  MT_REQUIRE(!d.streaming || t.num_train_epochs == 0.0,
             "{}: dataset.streaming does not know the corpus length before reading it; set training.num_steps, not "
             "training.num_train_epochs", origin);
  MT_REQUIRE(!d.streaming || d.val_size == 0.0,
             "{}: dataset.streaming cannot hold examples out of a stream; use dataset.eval_dataset", origin);
  MT_REQUIRE(t.warmup_steps == 0 || t.warmup_ratio == 0.0,
             "{}: training.warmup_steps {} and training.warmup_ratio {} both set the warmup; keep one", origin,
             t.warmup_steps, real_to_text(t.warmup_ratio));
  MT_REQUIRE(t.dpo_label_smoothing == 0.0 || t.pref_loss == "sigmoid",
             "{}: training.dpo_label_smoothing: {}: only pref_loss sigmoid smooths its labels (pref_loss is {})", origin,
             real_to_text(t.dpo_label_smoothing), t.pref_loss);
  MT_REQUIRE(t.ref_model.empty() || t.stage == "kto" || (t.pref_loss != "orpo" && t.pref_loss != "simpo"),
             "{}: training.ref_model: '{}': pref_loss {} uses no reference model", origin, t.ref_model, t.pref_loss);
  MT_REQUIRE((t.stage != "dpo" && t.stage != "kto") || !d.packing,
             "{}: dataset.packing: training.stage {} keeps each example's sequences apart; set it to false", origin,
             t.stage);
  MT_REQUIRE(t.gradient_accumulation_steps == 0 || t.batch_size % t.gradient_accumulation_steps == 0,
             "{}: training.gradient_accumulation_steps: {} does not divide training.batch_size {}", origin,
             t.gradient_accumulation_steps, t.batch_size);
}

}  // namespace

Config parse_config(const std::string& yaml_text, const std::string& origin,
                    const std::vector<std::string>& overrides) {
  YAML::Node root;
  try {
    root = load_yaml_bounded(yaml_text, origin);
  } catch (const YAML::ParserException& e) {
    throw Error(fmt::format("{}:{}:{}: invalid YAML: {}", origin, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  if (is_llamafactory_config(root)) {  // LLaMA-Factory's flat YAML: turned into ours, then read as ours
    const ConvertedConfig converted = convert_llamafactory_config(root, origin);
    if (!converted.ignored.empty())
      log::warn("{}: LLaMA-Factory keys that change nothing here, ignored: {}", origin,
                fmt::join(converted.ignored, "; "));
    root = YAML::Load(converted.yaml_text);
  }
  Config config;
  apply_document(config, root, origin);
  for (const std::string& assignment : overrides) apply_override(config, assignment);
  validate(config, origin);
  config.runtime = with_environment(config.runtime);  // the switches' variables over the file's runtime: section
  config.yaml_text = config_to_yaml(config);
  return config;
}

DType stream_dtype_of(const Config& config) {
  if (config.model.stream_dtype == "auto") return config.store.offload == "optimizer+master" ? DType::bf16 : DType::f32;
  return dtype_from_name(config.model.stream_dtype);
}

Config load_config(const std::filesystem::path& file, const std::vector<std::string>& overrides) {
  // A regular file, or a stream: a pipe, `--config <(...)`, /dev/stdin.
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(file, ec);
  MT_REQUIRE(std::filesystem::exists(st), "{}: no such configuration file", file.string());
  MT_REQUIRE(!std::filesystem::is_directory(st), "{}: is a directory, not a configuration file", file.string());
  std::ifstream in(file, std::ios::binary);
  std::string text(std::istreambuf_iterator<char>(in), {});
  MT_REQUIRE(in.is_open() && !in.bad(), "{}: cannot read the configuration file", file.string());
  Config config = parse_config(text, file.string(), overrides);
  config.source = file;
  return config;
}

std::vector<std::string> accepted_config_keys() {
  std::vector<std::string> keys;
  for (const Field& f : schema()) keys.push_back(fmt::format("{}.{}", f.section, f.key));
  return keys;
}

std::string config_to_yaml(const Config& config) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  for (std::string_view section : sections()) {
    out << YAML::Key << std::string(section) << YAML::Value << YAML::BeginMap;
    for (const Field& f : schema())
      if (f.section == section) out << YAML::Key << std::string(f.key) << YAML::Value << f.show(config);
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace mt
