// megatrain: the command-line entry point. Every subcommand registers itself (cli/command.h); every
// failure ends as one line "megatrain: error: ..." on stderr and exit status 1.
#include <cstdio>
#include <exception>
#include <vector>

#include "cli/command.h"

int main(int argc, char** argv) {
  CLI::App app{"MegaTrain: full-parameter training of large language models on one GPU"};
  app.require_subcommand(1);
  std::vector<mt::Command> commands;
  mt::add_train_command(app, commands);

  CLI11_PARSE(app, argc, argv);
  try {
    for (const auto& c : commands)
      if (*c.app) c.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "megatrain: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
