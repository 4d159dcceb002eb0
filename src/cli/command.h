// The subcommand registry of the `megatrain` binary: each command file adds its CLI11 subcommand and
// the action that runs when it was chosen. Invariant: main() runs exactly one action, inside its error handler.
#pragma once
#include <CLI/CLI.hpp>

#include <functional>
#include <vector>

namespace mt {

struct Command {
  CLI::App* app = nullptr;
  std::function<void()> run;
};

void add_train_command(CLI::App& root, std::vector<Command>& commands);
void add_preview_data_command(CLI::App& root, std::vector<Command>& commands);
void add_bench_command(CLI::App& root, std::vector<Command>& commands);
void add_tokenize_command(CLI::App& root, std::vector<Command>& commands);
void add_bench_optim_command(CLI::App& root, std::vector<Command>& commands);
void add_bench_delta_rule_command(CLI::App& root, std::vector<Command>& commands);
void add_calc_resource_command(CLI::App& root, std::vector<Command>& commands);
void add_inspect_command(CLI::App& root, std::vector<Command>& commands);
void add_export_command(CLI::App& root, std::vector<Command>& commands);
void add_convert_config_command(CLI::App& root, std::vector<Command>& commands);

}  // namespace mt
