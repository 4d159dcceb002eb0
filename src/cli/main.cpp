// megatrain: the command-line entry point. Each subcommand parses its flags here and calls its module;
// every failure ends as one line "megatrain: error: ..." on stderr and exit status 1.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/train/trainer.h"
#include "config/config.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"MegaTrain: full-parameter training of large language models on one GPU"};
  app.require_subcommand(1);

  std::string config_file;
  std::vector<std::string> overrides;
  CLI::App* train = app.add_subcommand("train", "train a model as a config file describes");
  train->add_option("--config", config_file, "run configuration (YAML)")->required();
  train->add_option("--set", overrides, "override one key: section.key=value (repeatable)");

  CLI11_PARSE(app, argc, argv);
  try {
    if (*train) mt::run_training(mt::load_config(config_file, overrides));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "megatrain: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
