// `megatrain train --config FILE [--set section.key=value ...]`.
#include <memory>
#include <string>

#include "cli/command.h"
#include "cli/train/trainer.h"
#include "config/config.h"

namespace mt {

void add_train_command(CLI::App& root, std::vector<Command>& commands) {
  auto config_file = std::make_shared<std::string>();
  auto overrides = std::make_shared<std::vector<std::string>>();
  CLI::App* app = root.add_subcommand("train", "train a model as a config file describes");
  app->add_option("--config", *config_file, "run configuration (YAML)")->required();
  app->add_option("--set", *overrides, "override one key: section.key=value (repeatable)");
  commands.push_back({app, [=] { run_training(load_config(*config_file, *overrides)); }});
}

}  // namespace mt
