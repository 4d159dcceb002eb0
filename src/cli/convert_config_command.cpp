// `megatrain convert-config FILE [--set section.key=value ...]`: prints our configuration (every key, effective
// values) for a LLaMA-Factory training YAML, or for one of ours.
// Invariant: writes only to stdout; a file `train` would refuse is refused here with the same message.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "config/config.h"

namespace mt {

void add_convert_config_command(CLI::App& root, std::vector<Command>& commands) {
  struct Options {
    std::string file;
    std::vector<std::string> overrides;
  };
  auto o = std::make_shared<Options>();
  CLI::App* app = root.add_subcommand("convert-config", "print our YAML for a LLaMA-Factory training YAML");
  app->add_option("file", o->file, "LLaMA-Factory (or MegaTrain) training YAML")->required();
  app->add_option("--set", o->overrides, "section.key=value, applied after the file");
  commands.push_back({app, [o] {
                        const Config c = load_config(o->file, o->overrides);
                        std::fputs(c.yaml_text.c_str(), stdout);
                      }});
}

}  // namespace mt
