// `megatrain train --config FILE [--set section.key=value ...]`, under mpirun on every rank: world rank 0
// reads the config and trains; the other ranks serve the optimizer on their slices of the host store.
#include <memory>
#include <string>

#include "cli/command.h"
#include "cli/train/trainer.h"
#include "cli/train/training_worker.h"
#include "config/config.h"
#include "dist/numa_binding.h"

namespace mt {

void add_train_command(CLI::App& root, std::vector<Command>& commands) {
  auto config_file = std::make_shared<std::string>();
  auto overrides = std::make_shared<std::vector<std::string>>();
  CLI::App* app = root.add_subcommand("train", "train a model as a config file describes");
  app->add_option("--config", *config_file, "run configuration (YAML)")->required();
  app->add_option("--set", *overrides, "override one key: section.key=value (repeatable)");
  commands.push_back({app, [=] {
                        const dist::Context& ctx = dist::context();
                        dist::log_bindings(ctx);
                        if (ctx.is_root())
                          run_training(load_config(*config_file, *overrides));
                        else
                          run_training_worker();
                      }});
}

}  // namespace mt
