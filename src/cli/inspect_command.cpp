// `megatrain inspect FILE [--json]`: what a checkpoint holds — step, model architecture, every tensor with shape,
// dtype and L2 norm, an optimizer state summary and the data cursor. Invariant: reads the file only; a file
// that is not a readable checkpoint is one error line and exit status 1.
#include <cmath>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_reader.h"
#include "cli/command.h"
#include "model/model_spec.h"

namespace mt {
namespace {

double l2_norm(const std::vector<float>& v) {
  double s = 0.0;
  for (const float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

nlohmann::json describe(const CheckpointFile& ckpt) {
  const CheckpointMeta& m = ckpt.meta();
  // A checkpoint's model was accepted (trust_remote_code included) by the run that wrote it.
  const ModelSpec spec = parse_model_spec(nlohmann::json::parse(m.model_config_json), ckpt.path().string(), true);
  const AttentionSpec& first = spec.layers.front().attention;
  nlohmann::json groups = nlohmann::json::object();
  for (const char* group : {"params", "optim/exp_avg", "optim/exp_avg_sq"}) {
    nlohmann::json tensors = nlohmann::json::array();
    double total = 0.0;
    int64_t numel = 0;
    for (const std::string& name : ckpt.tensor_names(group)) {
      const std::vector<float> v = ckpt.read(group, name);
      const double norm = l2_norm(v);
      total += norm * norm;
      numel += static_cast<int64_t>(v.size());
      tensors.push_back({{"name", name}, {"shape", ckpt.shape(group, name)}, {"dtype", ckpt.dtype(group, name)},
                         {"l2_norm", norm}});
    }
    groups[group] = {{"tensors", tensors}, {"numel", numel}, {"l2_norm", std::sqrt(total)}};
  }
  return {{"file", ckpt.path().string()},
          {"format_version", m.format_version},
          {"step", m.step},
          {"tokens_seen", m.tokens_seen},
          {"optimizer_updates_applied", m.updates_applied},
          {"model", {{"name", m.model_name}, {"architecture", spec.architecture}, {"num_layers", spec.num_layers},
                     {"hidden_size", spec.hidden_size}, {"num_heads", first.num_heads},
                     {"num_kv_heads", first.num_kv_heads}, {"vocab_size", spec.vocab_size}}},
          {"data_cursor", {{"epoch", m.data_epoch}, {"index", m.data_index}, {"seed", m.seed},
                           {"shuffle", m.shuffle != 0}}},
          {"versions", m.versions},
          {"groups", groups}};
}

void print_text(const nlohmann::json& d) {
  const auto& model = d["model"];
  fmt::print("checkpoint {} (format {}, written by {})\n", d["file"].get<std::string>(),
             d["format_version"].get<int64_t>(), d["versions"].get<std::string>());
  fmt::print("step {}, {} tokens seen, {} optimizer updates applied\n", d["step"].get<int64_t>(),
             d["tokens_seen"].get<int64_t>(), d["optimizer_updates_applied"].get<int64_t>());
  fmt::print("model {}: {}, {} layers, hidden {}, {} heads / {} kv heads, vocab {}\n",
             model["name"].get<std::string>(), model["architecture"].get<std::string>(),
             model["num_layers"].get<int64_t>(), model["hidden_size"].get<int64_t>(), model["num_heads"].get<int64_t>(),
             model["num_kv_heads"].get<int64_t>(), model["vocab_size"].get<int64_t>());
  const auto& cur = d["data_cursor"];
  fmt::print("data cursor: epoch {}, index {} (seed {}, shuffle {})\n", cur["epoch"].get<int64_t>(),
             cur["index"].get<int64_t>(), cur["seed"].get<int64_t>(), cur["shuffle"].get<bool>());
  for (const auto& [group, g] : d["groups"].items()) {
    fmt::print("/{}: {} tensors, {} elements, L2 norm {:.6g}\n", group, g["tensors"].size(),
               g["numel"].get<int64_t>(), g["l2_norm"].get<double>());
    if (group != "params") continue;
    for (const auto& t : g["tensors"])
      fmt::print("  {:<56} {:<14} {:<8} {:.6g}\n", t["name"].get<std::string>(), t["shape"].dump(),
                 t["dtype"].get<std::string>(), t["l2_norm"].get<double>());
  }
}

}  // namespace

void add_inspect_command(CLI::App& root, std::vector<Command>& commands) {
  auto file = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  CLI::App* app = root.add_subcommand("inspect", "describe a checkpoint: step, model, tensors, optimizer, data");
  app->add_option("file", *file, "checkpoint file (.h5)")->required();
  app->add_flag("--json", *json, "print one JSON object");
  commands.push_back({app, [=] {
                        const nlohmann::json d = describe(CheckpointFile(*file));
                        if (*json) fmt::print("{}\n", d.dump(2));
                        else print_text(d);
                        std::fflush(stdout);
                      }});
}

}  // namespace mt
