// `megatrain train --config FILE [--set section.key=value ...]`, under mpirun on every rank: world rank 0
// reads the config first and fixes the compute ranks per node; compute ranks train on their shares of each
// batch (rank 0 logs and saves), the other ranks serve the optimizer on their slices of the host store.
// SIGTERM, SIGINT and SIGUSR1 stop the run gracefully after a checkpoint (core/stop_signal.h).
#include <memory>
#include <optional>
#include <string>

#include "cli/command.h"
#include "cli/runtime/backend_select.h"
#include "cli/runtime/run.h"
#include "cli/train/trainer.h"
#include "cli/train/training_worker.h"
#include "config/config.h"
#include "core/stop_signal.h"
#include "core/log.h"
#include "dist/data_parallel.h"
#include "dist/numa_binding.h"

namespace mt {

void add_train_command(CLI::App& root, std::vector<Command>& commands) {
  auto config_file = std::make_shared<std::string>();
  auto overrides = std::make_shared<std::vector<std::string>>();
  CLI::App* app = root.add_subcommand("train", "train a model as a config file describes");
  app->add_option("--config", *config_file, "run configuration (YAML)")->required();
  app->add_option("--set", *overrides, "override one key: section.key=value (repeatable)");
  commands.push_back({app, [=] {
                        stop_signal::install();
                        const dist::Context& ctx = dist::context();
                        dist::log_bindings(ctx);
                        std::optional<Config> config;
                        if (ctx.is_root()) config = load_config(*config_file, *overrides);
                        const dist::DataParallel dp =
                            dist::make_data_parallel(config ? gpus_per_node(config->training.gpus_per_node) : 0, visible_gpu_numa_nodes());
                        const RunRoles roles = run_roles(dp);
                        if (!roles.computes) return run_training_worker();
                        if (!roles.root) {
                          log::set_level(log::Level::warn);  // world rank 0 tells the story
                          config = load_config(*config_file, *overrides);
                        }
                        run_training(*config, dp);
                      }});
}

}  // namespace mt
