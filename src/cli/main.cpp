// megatrain: the command-line entry point, on every rank of an MPI job; alone it prints its usage, with --version
// its version and the commit it was built from. Every subcommand registers itself
// (cli/command.h); every failure ends as one line "megatrain: error: ..." on stderr and exit status 1, and
// with several ranks it names the rank and ends the whole job (dist/check.h). A training run stopped by a
// signal after its checkpoint exits with stop_signal::kExitStoppedForRequeue (core/stop_signal.h).
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "cli/command.h"
#include "core/stop_signal.h"
#include "dist/check.h"
#include "dist/context.h"
#include "dist/numa_binding.h"
#include "megatrain_commit.h"

int main(int argc, char** argv) {
  mt::dist::init(&argc, &argv);
  CLI::App app{"MegaTrain: full-parameter training of large language models on one GPU", "megatrain"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "megatrain " MEGATRAIN_VERSION " (commit " MEGATRAIN_COMMIT ")");
  std::vector<mt::Command> commands;
  mt::add_train_command(app, commands);
  mt::add_preview_data_command(app, commands);
  mt::add_bench_command(app, commands);
  mt::add_tokenize_command(app, commands);
  mt::add_bench_optim_command(app, commands);
  mt::add_bench_delta_rule_command(app, commands);
  mt::add_calc_resource_command(app, commands);
  mt::add_inspect_command(app, commands);
  mt::add_export_command(app, commands);
  mt::add_convert_config_command(app, commands);

  if (argc == 1) {  // no subcommand: the usage, as --help prints it
    std::fputs(app.help().c_str(), stdout);
    return 0;
  }
  // The first word that is not an option names the subcommand: an unknown one is named, with the known ones.
  if (argc > 1 && argv[1][0] != '-') {
    const std::string_view word = argv[1];
    std::string known;
    bool found = false;
    for (const auto& c : commands) {
      found = found || c.app->get_name() == word;
      known += (known.empty() ? "" : ", ") + c.app->get_name();
    }
    if (!found) return mt::dist::end_job_with_error("unknown subcommand '" + std::string(word) + "' (one of: " + known + ")");
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {  // a bad flag or value: one line naming it
    return mt::dist::end_job_with_error(e.what());
  }
  try {
    mt::dist::bind_rank(mt::dist::context());  // before the first OpenMP region
    for (const auto& c : commands)
      if (*c.app) c.run();
  } catch (const std::exception& e) {
    return mt::dist::end_job_with_error(e.what());
  }
  return mt::stop_signal::exit_status();
}
